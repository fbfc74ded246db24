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
to one that is about to be fenced out. It is released only while this worker holds the material's lock
(`MediaLocks.material`), which every live executor holds for its whole run, so a running attempt is never
touched.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from media_worker.service_layer.ports import AttemptFolder, MediaLocks, Storage, UnitOfWorkFactory

__all__ = ["AttemptRecovery"]

log = logging.getLogger(__name__)


class AttemptRecovery:
    def __init__(self, uow: UnitOfWorkFactory, locks: MediaLocks, storage: Storage, instance_id: str) -> None:
        self._uow = uow
        self._locks = locks
        self._storage = storage
        self._instance_id = instance_id

    async def release_predecessor_leases(self) -> int:
        """Hand back running jobs still leased to this instance id whose material lock is free; returns how
        many. Call only before this worker claims anything."""
        async with self._uow() as uow:
            leases = await uow.jobs.leases_of(self._instance_id)
        released = 0
        for lease in leases:
            async with self._locks.material(lease.material_id) as held:
                if not held:
                    continue  # a live session still runs it
                async with self._uow() as uow:
                    if await uow.jobs.release_dead_lease(lease.job_id, self._instance_id, lease.token):
                        await uow.materials.back_to_pending(lease.material_id)
                        released += 1
        if released:
            log.info("released the leases of this instance's previous process", extra={"jobs": released})
        return released

    async def sweep_work_folders(self) -> int:
        """Remove the `work/` folders of dead attempts; returns how many."""
        folders = self._storage.work_folders()
        if not folders:
            return 0
        async with self._uow() as uow:
            live = await uow.jobs.live_tokens([f.token for f in folders])
        return await self._remove(f for f in folders if f.token not in live)

    async def sweep_output_folders(
        self, material_ids: Iterable[uuid.UUID] | None = None, *, lock_held: bool = False
    ) -> int:
        """Remove the `outputs/` folders of dead attempts of `material_ids` (None: every material).

        Each material is swept under its lock (`lock_held`: the caller holds it already, being the
        material's executor); a material whose lock is busy is skipped, its executor sweeps it."""
        folders = self._storage.output_folders(material_ids)
        if not folders:
            return 0
        by_material: dict[uuid.UUID, list[AttemptFolder]] = {}
        for folder in folders:
            if folder.material_id is not None:
                by_material.setdefault(folder.material_id, []).append(folder)
        async with self._uow() as uow:
            live = await uow.jobs.live_tokens([f.token for f in folders], list(by_material))
        removed = 0
        for material_id, own in by_material.items():
            dead = [f for f in own if f.token not in live]
            if not dead:
                continue
            if lock_held:
                removed += await self._remove(dead)
                continue
            async with self._locks.material(material_id) as held:
                if held:
                    removed += await self._remove(dead)
        return removed

    async def _remove(self, folders: Iterable[AttemptFolder]) -> int:
        removed = 0
        for folder in folders:
            await self._storage.remove_attempt_folder(folder)
            removed += 1
        if removed:
            log.info("removed temporary folders of dead transcode attempts", extra={"folders": removed})
        return removed
