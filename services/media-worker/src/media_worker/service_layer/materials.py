"""Material use cases: a material's status, its outputs, the retry of a failed one, the owner's listing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from media_worker.domain.errors import MaterialNotFound, NotRetryable
from media_worker.domain.material import Material
from media_worker.domain.outputs import OUTPUT_BY_KIND
from media_worker.service_layer.ports import Storage, UnitOfWorkFactory
from yovision_platform.web import decode_cursor, encode_cursor

__all__ = ["MATERIAL_PAGE_MAX_ITEMS", "MaterialPage", "Materials", "OutputFile"]

MATERIAL_PAGE_MAX_ITEMS = 100


@dataclass(frozen=True)
class OutputFile:
    path: Path
    media_type: str


@dataclass(frozen=True)
class MaterialPage:
    items: list[Material]
    next_cursor: str | None


class Materials:
    def __init__(
        self, uow: UnitOfWorkFactory, storage: Storage, *, job_queued: Callable[[], None] | None = None
    ) -> None:
        self._uow = uow
        self._storage = storage
        self._job_queued = job_queued

    async def status(self, owner: str, material_id: uuid.UUID) -> Material:
        """The owner's material; `not_found` for an unknown one and for another owner's."""
        async with self._uow() as uow:
            return MaterialNotFound.unless_found(await uow.materials.get(material_id, owner))

    async def output(self, owner: str, material_id: uuid.UUID, kind: str) -> OutputFile:
        """Where one recorded output of the owner's material is; `not_found` until it is recorded."""
        output = OUTPUT_BY_KIND.get(kind)
        if output is None:
            raise MaterialNotFound()
        key = (await self.status(owner, material_id)).outputs.get(kind)
        if key is None:
            raise MaterialNotFound()
        return OutputFile(self._storage.local_path(key), output.media_type)

    async def retry(self, owner: str, material_id: uuid.UUID) -> None:
        """failed -> pending, the material and its job; `not_retryable` in any other status."""
        async with self._uow() as uow:
            if await uow.materials.get(material_id, owner) is None:
                raise MaterialNotFound()
            retried = await uow.materials.reset_failed(material_id, owner)
            if retried:
                await uow.jobs.reset_failed(material_id)
        if not retried:
            raise NotRetryable()
        if self._job_queued is not None:
            self._job_queued()

    async def page(self, owner: str, limit: int, cursor: str | None) -> MaterialPage:
        """The owner's materials, newest first, `limit` at most, after the page that ended at `cursor`."""
        after = decode_cursor(cursor, uuid.UUID) if cursor is not None else None  # else InvalidCursor
        async with self._uow() as uow:
            found = await uow.listing.materials(owner, limit + 1, after)
        items = found[:limit]
        last = items[-1] if len(found) > limit else None
        return MaterialPage(items, encode_cursor(last.created_at, last.material_id) if last else None)
