"""Sense's view of the shared MediaMTX client (`yovision_platform.mediamtx`): path configs as `PathConfig`.

Only the fields Sense manages are read back (`source`, `sourceOnDemand`); `source` is a secret and never
leaves this module except inside a `PathConfig`, whose repr redacts it.
"""

from __future__ import annotations

import httpx

from sense_reconciler.domain import limits
from sense_reconciler.domain.reconcile import PathConfig
from yovision_platform.mediamtx import (
    LIST_MAX_PAGES,
    LIST_PAGE_ITEMS,
    MediaMtxApi,
    MediaMtxCredentials,
    MediaMtxError,
)

__all__ = ["MediaMtxClient", "MediaMtxError"]


class MediaMtxClient(MediaMtxApi):
    def __init__(
        self,
        base_url: str,
        *,
        deadline_seconds: float = limits.OPERATION_DEADLINE_SECONDS_DEFAULT,
        transport: httpx.AsyncBaseTransport | None = None,
        page_items: int = LIST_PAGE_ITEMS,
        max_pages: int = LIST_MAX_PAGES,
        credentials: MediaMtxCredentials | None = None,
    ) -> None:
        super().__init__(
            base_url,
            deadline_seconds=deadline_seconds,
            transport=transport,
            page_items=page_items,
            max_pages=max_pages,
            credentials=credentials,
        )

    async def get_path(self, name: str) -> PathConfig | None:
        body = await self.get_path_object(name)
        if body is None:
            return None
        source, on_demand = body.get("source"), body.get("sourceOnDemand")
        if not isinstance(source, str) or not isinstance(on_demand, bool):
            raise MediaMtxError("mediamtx_bad_response")
        return PathConfig(source=source, source_on_demand=on_demand)

    async def add_path(self, name: str, config: PathConfig) -> None:
        await self.add_path_object(name, config.to_mediamtx())

    async def replace_path(self, name: str, config: PathConfig) -> None:
        await self.replace_path_object(name, config.to_mediamtx())
