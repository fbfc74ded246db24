"""One apply at a time (`ApplyLock`): PostgreSQL's session advisory lock and the fake alike."""

from __future__ import annotations

import asyncpg
import pytest

from orphan_scanner.adapters.apply_lock import PostgresApplyLock
from orphan_scanner.adapters.memory import MemoryApplyLock
from orphan_scanner.domain.errors import ApplyInProgress
from orphan_scanner.service_layer.ports import ApplyLock
from tests.support.stack import MigratedSchema


class Failure(Exception):
    pass


async def fail_while_holding(lock: ApplyLock) -> None:
    async with lock.hold():
        raise Failure


async def hold_twice(lock: ApplyLock) -> None:
    async with lock.hold(), lock.hold():
        pass


class ApplyLockContract:
    """Each adapter gives `lock`."""

    async def test_a_second_holder_is_refused_at_once(self, lock: ApplyLock) -> None:
        with pytest.raises(ApplyInProgress) as refused:
            await hold_twice(lock)
        assert (refused.value.code, refused.value.status) == ("apply_in_progress", 409)

    async def test_the_lock_is_free_again_after_its_holder_ends(self, lock: ApplyLock) -> None:
        async with lock.hold():
            pass
        with pytest.raises(Failure):
            await fail_while_holding(lock)
        async with lock.hold():  # neither a normal end nor a failure leaves it held
            pass


class TestPostgresApplyLock(ApplyLockContract):
    @pytest.fixture
    def lock(self, orphan_pool: asyncpg.Pool, orphan_schema: MigratedSchema) -> ApplyLock:
        return PostgresApplyLock(orphan_pool, orphan_schema.name)

    async def test_another_process_holding_the_lock_refuses_the_apply(
        self, lock: ApplyLock, orphan_schema: MigratedSchema
    ) -> None:
        assert isinstance(lock, PostgresApplyLock)
        other = await asyncpg.connect(orphan_schema.runtime_dsn)
        try:
            assert await other.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", lock.key)
            with pytest.raises(ApplyInProgress):
                await hold_twice(lock)
        finally:
            await other.close()  # a crashed holder: its session ends, the lock goes with it
        async with lock.hold():
            pass


class TestMemoryApplyLock(ApplyLockContract):
    @pytest.fixture
    def lock(self) -> ApplyLock:
        return MemoryApplyLock()
