"""Recovery of dead transcode attempts: their leases and their temporary folders.

An attempt is dead for good once its lease token is no longer the job's current token (the job was
finished, handed back or claimed again): every write of an attempt is fenced by its token, and tokens are
never reused, so nothing can make such an attempt record anything again. Its folders are then garbage:
`work/<job>-<token>/` (ffmpeg's partial files) always, `outputs/<material>/<token>/` unless the material's
references point into it (a finished attempt's outputs). Folders are listed *before* the database is
asked, so a folder created meanwhile by a new attempt is never considered.

A restarted instance with a stable `MEDIA_INSTANCE_ID` also releases its predecessor's leases at once
instead of waiting for them to expire: a lease that names this instance while this worker has not claimed
anything yet belongs to a process that died, or -- when two live processes were misconfigured with one id --
to one that is about to be fenced out. It is released only while this worker holds the material's advisory
lock, which every live executor holds for its whole run, so a running attempt is never touched.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

import asyncpg

from media_worker.adapters.repository import MediaRepository
from media_worker.adapters.storage import AttemptFolder, Storage

__all__ = ["AttemptRecovery"]

log = logging.getLogger(__name__)


class AttemptRecovery:
    def __init__(self, pool: asyncpg.Pool, repo: MediaRepository, storage: Storage, instance_id: str) -> None:
        self._pool = pool
        self._repo = repo
        self._storage = storage
        self._instance_id = instance_id

    async def release_predecessor_leases(self) -> int:
        """Hand back running jobs still leased to this instance id whose material lock is free; returns how
        many. Call only before this worker claims anything."""
        released = 0
        async with self._pool.acquire() as conn:
            for lease in await self._repo.leases_of(conn, self._instance_id):
                material_id: uuid.UUID = lease["material_id"]
                if not await self._repo.try_lock_material(conn, material_id):
                    continue  # a live session still runs it
                try:
                    if await self._repo.release_dead_lease(
                        conn, lease["id"], self._instance_id, lease["lease_token"]
                    ):
                        released += 1
                finally:
                    await self._repo.unlock_material(conn, material_id)
        if released:
            log.info("released the leases of this instance's previous process", extra={"jobs": released})
        return released

    async def sweep_work_folders(self) -> int:
        """Remove the `work/` folders of dead attempts; returns how many."""
        folders = self._storage.work_folders()
        if not folders:
            return 0
        async with self._pool.acquire() as conn:
            live = await self._repo.tokens_in_use(conn, [f.token for f in folders])
        return await self._remove(f for f in folders if f.token not in live)

    async def sweep_output_folders(
        self, material_ids: Iterable[uuid.UUID] | None = None, *, lock_held: bool = False
    ) -> int:
        """Remove the `outputs/` folders of dead attempts of `material_ids` (None: every material).

        Each material is swept under its advisory lock (`lock_held`: the caller holds it already, being the
        material's executor); a material whose lock is busy is skipped, its executor sweeps it."""
        folders = self._storage.output_folders(material_ids)
        if not folders:
            return 0
        removed = 0
        async with self._pool.acquire() as conn:
            by_material: dict[uuid.UUID, list[AttemptFolder]] = {}
            for folder in folders:
                if folder.material_id is not None:
                    by_material.setdefault(folder.material_id, []).append(folder)
            live = await self._repo.tokens_in_use(conn, [f.token for f in folders], list(by_material))
            for material_id, own in by_material.items():
                dead = [f for f in own if f.token not in live]
                if not dead:
                    continue
                if lock_held:
                    removed += await self._remove(dead)
                elif await self._repo.try_lock_material(conn, material_id):
                    try:
                        removed += await self._remove(dead)
                    finally:
                        await self._repo.unlock_material(conn, material_id)
        return removed

    async def _remove(self, folders: Iterable[AttemptFolder]) -> int:
        removed = 0
        for folder in folders:
            await self._storage.remove_attempt_folder(folder)
            removed += 1
        if removed:
            log.info("removed temporary folders of dead transcode attempts", extra={"folders": removed})
        return removed
