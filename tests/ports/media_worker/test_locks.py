"""The cross-instance locks: taken without waiting, one holder at a time, free again when the block ends
(also by an exception). That PostgreSQL drops the lock of a dead session is proven in
tests/integration/media_worker/test_process.py (a SIGKILLed worker's material is taken over)."""

from __future__ import annotations

import uuid

import pytest

from tests.ports.media_worker.conftest import Backend, BackendContract, InMemory, OnPostgres


class Failure(Exception):
    pass


class LocksContract(BackendContract):
    async def test_a_material_lock_has_one_holder_at_a_time(self, backend: Backend) -> None:
        material, other = uuid.uuid4(), uuid.uuid4()
        async with backend.locks.material(material) as first:
            assert first is True
            async with backend.locks.material(material) as second:
                assert second is False
            async with backend.locks.material(other) as independent, backend.locks.merge_slot() as slot:
                assert (independent, slot) == (True, True)
        async with backend.locks.material(material) as again:
            assert again is True

    async def test_the_merge_slot_has_one_holder_at_a_time(self, backend: Backend) -> None:
        async with backend.locks.merge_slot() as first, backend.locks.merge_slot() as second:
            assert (first, second) == (True, False)
        async with backend.locks.merge_slot() as again:
            assert again is True

    async def test_a_failing_holder_frees_its_lock(self, backend: Backend) -> None:
        material = uuid.uuid4()
        with pytest.raises(Failure):
            await self._hold_then_fail(backend, material)
        async with backend.locks.material(material) as again:
            assert again is True

    @staticmethod
    async def _hold_then_fail(backend: Backend, material: uuid.UUID) -> None:
        async with backend.locks.material(material) as held:
            assert held
            raise Failure


class TestPostgresLocks(OnPostgres, LocksContract):
    pass


class TestMemoryLocks(InMemory, LocksContract):
    pass
