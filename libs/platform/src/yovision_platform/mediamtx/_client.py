"""A thin, typed client for the MediaMTX Control API v3 (`/v3/config/paths/...`), shared by the services
that manage MediaMTX paths (sense-reconciler configures them, orphan-scanner enumerates and prunes them).

Contract:
- every call runs under `deadline_seconds` (connect + read + whole call) and is cancellable;
- calls that name a path accept only *managed* names (`is_managed_path_name`): what MediaMTX itself accepts
  as a path name (letters, digits, `_ . - /`, e.g. `site-1/cam-07`), minus what cannot round-trip through
  its HTTP API or would not be one path: empty segments (`a//b`: the router folds them), `.`/`..` segments
  (MediaMTX refuses them; HTTP clients fold them), a leading or trailing `/`, and the catch-all names
  `all`/`all_others`. Anything else is refused before a request is made. Each segment is percent-encoded
  and the segments are joined with a literal `/`, which MediaMTX's `*name` routes take as the name;
- with credentials (a user with the `api` permission), every request carries HTTP Basic authentication;
  the credentials are never logged or put into an error (401 is `mediamtx_http_401`);
- `delete_path` deletes exactly one named path, never a pattern; 404 counts as done (returns False);
- `list_path_names` walks `/v3/config/paths/list` page by page with a page cap, refuses a page that repeats
  the previous one and items without a string `name`, and returns sorted unique names only (any name
  MediaMTX holds, including hand-made ones with "/" or "~regex" names). The whole walk, not each page, runs
  under the deadline. Pages are large because every list request costs MediaMTX time proportional to all
  configured paths (measured: 10,000 paths take 8-12 s at 100 per page, 1.4 s at 1,000);
- errors are `MediaMtxError` with a stable code; neither a path's `source` nor a response body is ever
  logged, returned by the enumeration or put into an error. A refusal (4xx) also carries MediaMTX's
  reason, redacted (`redacted_reason`): every string value the request sent (a `source` is a secret),
  every URL and every quoted span but a plain word removed, printable ASCII only, at most
  `REASON_MAX_CHARS`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
from pydantic import SecretStr

__all__ = [
    "LIST_MAX_PAGES",
    "LIST_PAGE_ITEMS",
    "MANAGED_PATH_NAME_MAX_CHARS",
    "MANAGED_PATH_NAME_PATTERN",
    "REASON_MAX_CHARS",
    "MediaMtxApi",
    "MediaMtxCredentials",
    "MediaMtxError",
    "is_managed_path_name",
    "redacted_reason",
    "validate_api_url",
]

MANAGED_PATH_NAME_MAX_CHARS = 255
# MediaMTX's own rule is ^[0-9a-zA-Z_\-/.]+$ without "/" at either end and without "." or ".." segments;
# managed names also need non-empty segments (see the module docstring). A segment other than "." and "..",
# written without lookarounds so that fuzzers generate from it, and valid under the HTML `v` flag; the
# length (at most MANAGED_PATH_NAME_MAX_CHARS) is checked apart (a schema's `maxLength`).
_SEGMENT = r"(?:[A-Za-z0-9_\-]|\.[A-Za-z0-9_\-]|\.\.[A-Za-z0-9._\-])[A-Za-z0-9._\-]*"
MANAGED_PATH_NAME_PATTERN = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})*")
RESERVED_PATH_NAMES = frozenset({"all", "all_others"})
LIST_PAGE_ITEMS = 1000
LIST_MAX_PAGES = 1000
REASON_MAX_CHARS = 200
REASON_BODY_MAX_BYTES = 4096  # a longer error body is not read for a reason
# A quoted span, or a quote without its pair (then: up to the end).
_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"|['\"`].*")
_WORD = re.compile(r"[A-Za-z0-9_.\-]{1,64}")  # a quoted name MediaMTX may show: a field, a plain value
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*")
_UNPRINTABLE = re.compile(r"[^ -~]+")


def is_managed_path_name(name: str) -> bool:
    return (
        len(name) <= MANAGED_PATH_NAME_MAX_CHARS
        and MANAGED_PATH_NAME_PATTERN.fullmatch(name) is not None
        and name not in RESERVED_PATH_NAMES
    )


@dataclass(frozen=True)
class MediaMtxCredentials:
    """A MediaMTX user with the `api` permission. The password never appears in a repr, log or error."""

    user: str
    password: SecretStr

    def __repr__(self) -> str:
        return f"MediaMtxCredentials(user={self.user!r}, password=<redacted>)"

    @classmethod
    def parse(cls, text: str) -> MediaMtxCredentials:
        """`user:password` (one line). ValueError (naming no part of the text) when malformed."""
        user, sep, password = text.partition(":")
        if not sep or not user or not password or any(c.isspace() or ord(c) < 0x20 for c in text):
            raise ValueError("malformed MediaMTX credentials (expected one NAME:PASSWORD line)")
        return cls(user, SecretStr(password))


def validate_api_url(value: str) -> str:
    """The Control API base URL setting: http(s), a host, no credentials or query; trailing "/" dropped."""
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.hostname or "@" in parts.netloc or parts.query:
        raise ValueError("must be an http(s) URL without credentials or query")
    return value.rstrip("/")


def redacted_reason(text: str, secrets: Sequence[str] = ()) -> str | None:
    """MediaMTX's error text, safe to store and show: each of `secrets` (the request's values) and every
    URL replaced by `<redacted>`, every quoted span too unless it is a plain word (MediaMTX quotes the
    field names and the values it names: `'sourceRedirect' is useless ...` stays readable), and from a
    quote left unpaired to the end; then only printable ASCII, whitespace collapsed, at most
    REASON_MAX_CHARS characters. None when nothing is left."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "<redacted>")
    text = _URL.sub("<redacted>", text)
    text = _QUOTED.sub(_quoted_word_or_redacted, text)
    text = " ".join(_UNPRINTABLE.sub(" ", text).split())
    return text[:REASON_MAX_CHARS].rstrip() or None


def _quoted_word_or_redacted(match: re.Match[str]) -> str:
    inner = match.group(1) if match.group(1) is not None else match.group(2)
    return match.group(0) if inner is not None and _WORD.fullmatch(inner) else "<redacted>"


class MediaMtxError(Exception):
    """Codes: mediamtx_timeout, mediamtx_unreachable, mediamtx_http_<status>, mediamtx_bad_response,
    mediamtx_page_cap, mediamtx_duplicate_page, mediamtx_unmanaged_name.

    `status`: the HTTP status of an answer MediaMTX gave (None otherwise); `reason`: its redacted error
    text (`redacted_reason`), for an answer with a JSON `error`."""

    def __init__(self, code: str, *, status: int | None = None, reason: str | None = None) -> None:
        self.code = code
        self.status = status
        self.reason = reason
        super().__init__(code)


class MediaMtxApi:
    def __init__(
        self,
        base_url: str,
        *,
        deadline_seconds: float,
        transport: httpx.AsyncBaseTransport | None = None,
        page_items: int = LIST_PAGE_ITEMS,
        max_pages: int = LIST_MAX_PAGES,
        credentials: MediaMtxCredentials | None = None,
    ) -> None:
        if deadline_seconds <= 0:
            raise ValueError("deadline_seconds must be > 0")
        if page_items < 1 or max_pages < 1:
            raise ValueError("page_items and max_pages must be >= 1")
        self._deadline = deadline_seconds
        self._page_items = page_items
        self._max_pages = max_pages
        auth = (
            None
            if credentials is None
            else httpx.BasicAuth(credentials.user, credentials.password.get_secret_value())
        )
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=httpx.Timeout(deadline_seconds),
            transport=transport,
            auth=auth,
        )

    @property
    def deadline_seconds(self) -> float:
        return self._deadline

    async def aclose(self) -> None:
        await self._http.aclose()

    async def get_path_object(self, name: str) -> dict[str, Any] | None:
        """The path's configuration object, or None when it does not exist. Holds secrets: never log it."""
        response = await self._call("GET", f"/v3/config/paths/get/{_encoded(name)}", allow_404=True)
        if response.status_code == 404:
            return None
        return _json_object(response)

    async def add_path_object(self, name: str, body: Mapping[str, object]) -> None:
        await self._call("POST", f"/v3/config/paths/add/{_encoded(name)}", json=dict(body))

    async def replace_path_object(self, name: str, body: Mapping[str, object]) -> None:
        await self._call("POST", f"/v3/config/paths/replace/{_encoded(name)}", json=dict(body))

    async def delete_path(self, name: str) -> bool:
        """Delete exactly `name`. True when it existed, False on 404 (already gone: done)."""
        response = await self._call("DELETE", f"/v3/config/paths/delete/{_encoded(name)}", allow_404=True)
        return response.status_code != 404

    async def list_path_names(self) -> list[str]:
        try:
            async with asyncio.timeout(self._deadline):
                return await self._walk_pages()
        except TimeoutError:
            raise MediaMtxError("mediamtx_timeout") from None

    async def _walk_pages(self) -> list[str]:
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
            sent = kwargs.get("json")
            secrets = [v for v in sent.values() if isinstance(v, str)] if isinstance(sent, dict) else []
            raise MediaMtxError(
                f"mediamtx_http_{response.status_code}",
                status=response.status_code,
                reason=_error_reason(response, secrets),
            )
        return response


def _encoded(name: str) -> str:
    """The name as URL path segments: each one percent-encoded, joined by a literal "/"."""
    if not is_managed_path_name(name):
        raise MediaMtxError("mediamtx_unmanaged_name")
    return "/".join(quote(segment, safe="") for segment in name.split("/"))


def _error_reason(response: httpx.Response, secrets: Sequence[str]) -> str | None:
    if not 400 <= response.status_code < 500 or len(response.content) > REASON_BODY_MAX_BYTES:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return redacted_reason(error, secrets) if isinstance(error, str) else None


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
