"""A thin, typed client for the MediaMTX Control API v3 (`/v3/config/paths/...`).

Contract:
- every call runs under `deadline_seconds` (connect + read + whole call) and is cancellable;
- `get_path` returns only the managed fields of a path (`PathConfig`) or None when it does not exist;
- `delete_path` deletes exactly one named path; 404 counts as done (returns False);
- `list_path_names` walks `/v3/config/paths/list` page by page with a page cap, refuses a page that repeats
  the previous one and items without a string `name`, and returns sorted unique names only;
- errors are `MediaMtxError` with a stable code; neither a path's `source` nor a response body is ever
  logged, returned or put into an error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx

from sense_reconciler.domain import limits
from sense_reconciler.domain.model import validate_path_name
from sense_reconciler.domain.reconcile import PathConfig

__all__ = ["MediaMtxClient", "MediaMtxError"]


class MediaMtxError(Exception):
    """Codes: mediamtx_timeout, mediamtx_unreachable, mediamtx_http_<status>, mediamtx_bad_response,
    mediamtx_page_cap, mediamtx_duplicate_page."""

    def __init__(self, code: str) -> None:
        self.code = code
        super().__init__(code)


class MediaMtxClient:
    def __init__(
        self,
        base_url: str,
        *,
        deadline_seconds: float = limits.OPERATION_DEADLINE_SECONDS_DEFAULT,
        transport: httpx.AsyncBaseTransport | None = None,
        page_items: int = limits.MEDIAMTX_LIST_PAGE_ITEMS,
        max_pages: int = limits.MEDIAMTX_LIST_MAX_PAGES,
    ) -> None:
        if deadline_seconds <= 0:
            raise ValueError("deadline_seconds must be > 0")
        self._deadline = deadline_seconds
        self._page_items = page_items
        self._max_pages = max_pages
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), timeout=httpx.Timeout(deadline_seconds), transport=transport
        )

    @property
    def deadline_seconds(self) -> float:
        return self._deadline

    async def aclose(self) -> None:
        await self._http.aclose()

    async def get_path(self, name: str) -> PathConfig | None:
        response = await self._call("GET", f"/v3/config/paths/get/{_segment(name)}", allow_404=True)
        if response.status_code == 404:
            return None
        body = _json_object(response)
        source, on_demand = body.get("source"), body.get("sourceOnDemand")
        if not isinstance(source, str) or not isinstance(on_demand, bool):
            raise MediaMtxError("mediamtx_bad_response")
        return PathConfig(source=source, source_on_demand=on_demand)

    async def add_path(self, name: str, config: PathConfig) -> None:
        await self._call("POST", f"/v3/config/paths/add/{_segment(name)}", json=config.to_mediamtx())

    async def replace_path(self, name: str, config: PathConfig) -> None:
        await self._call("POST", f"/v3/config/paths/replace/{_segment(name)}", json=config.to_mediamtx())

    async def delete_path(self, name: str) -> bool:
        """Delete exactly `name`. True when it existed, False on 404 (already gone: done)."""
        response = await self._call("DELETE", f"/v3/config/paths/delete/{_segment(name)}", allow_404=True)
        return response.status_code != 404

    async def list_path_names(self) -> list[str]:
        names: set[str] = set()
        previous: Sequence[str] | None = None
        page = 0
        while True:
            if page >= self._max_pages:
                raise MediaMtxError("mediamtx_page_cap")
            response = await self._call(
                "GET", "/v3/config/paths/list", params={"page": page, "itemsPerPage": self._page_items}
            )
            body = _json_object(response)
            page_count, items = body.get("pageCount"), body.get("items")
            if not isinstance(page_count, int) or isinstance(page_count, bool) or not isinstance(items, list):
                raise MediaMtxError("mediamtx_bad_response")
            current = [_item_name(item) for item in items]
            if current and previous is not None and current == list(previous):
                raise MediaMtxError("mediamtx_duplicate_page")
            names.update(current)
            previous = current
            page += 1
            if page >= page_count or not current:
                return sorted(names)

    async def _call(self, method: str, url: str, *, allow_404: bool = False, **kwargs: Any) -> httpx.Response:
        try:
            async with asyncio.timeout(self._deadline):
                response = await self._http.request(method, url, **kwargs)
        except (TimeoutError, httpx.TimeoutException):
            raise MediaMtxError("mediamtx_timeout") from None
        except httpx.HTTPError:
            raise MediaMtxError("mediamtx_unreachable") from None
        if response.status_code == 404 and allow_404:
            return response
        if response.status_code != 200:
            raise MediaMtxError(f"mediamtx_http_{response.status_code}")
        return response


def _segment(name: str) -> str:
    return quote(validate_path_name(name), safe="")


def _json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        raise MediaMtxError("mediamtx_bad_response") from None
    if not isinstance(body, dict):
        raise MediaMtxError("mediamtx_bad_response")
    return body


def _item_name(item: object) -> str:
    if not isinstance(item, dict):
        raise MediaMtxError("mediamtx_bad_response")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise MediaMtxError("mediamtx_bad_response")
    return name
