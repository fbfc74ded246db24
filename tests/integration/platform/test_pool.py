"""The platform's pool on PostgreSQL: what a borrow leaves behind, and the session lock that never goes back
to the pool held (yovision_platform.storage)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.support.kafka import wait_until
from tests.support.stack import MigratedSchema
from yovision_platform.storage import create_pool, session_advisory_lock

KEY = "test-pool:apply"


@pytest.fixture
async def pool(migrated: MigratedSchema) -> AsyncIterator[asyncpg.Pool]:
    opened = await create_pool(migrated.runtime_dsn, application_name="test-pool", min_size=1, max_size=1)
    yield opened
    await opened.close()


async def lock_is_free(migrated: MigratedSchema) -> bool:
    """Whether another session can take the lock (and it gives it back at once)."""
    conn = await asyncpg.connect(migrated.runtime_dsn)
    try:
        taken = bool(await conn.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", KEY))
        if taken:
            await conn.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", KEY)
        return taken
    finally:
        await conn.close()


async def test_a_transaction_left_open_is_rolled_back_when_the_connection_goes_back(
    pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    async with pool.acquire() as conn:
        backend = await conn.fetchval("SELECT pg_backend_pid()")
        await conn.execute("BEGIN")
        await conn.execute(f'INSERT INTO "{migrated.name}".jobs (payload) VALUES ($1)', "left-open")
    async with pool.acquire() as conn:  # max_size 1: the same connection
        assert await conn.fetchval("SELECT pg_backend_pid()") == backend
        assert not conn.is_in_transaction()
        assert await conn.fetchval(f'SELECT count(*) FROM "{migrated.name}".jobs') == 0


async def test_the_session_lock_is_exclusive_and_released_with_the_block(
    pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    async with session_advisory_lock(pool, KEY) as held:
        assert held
        assert not await lock_is_free(migrated)
    assert await lock_is_free(migrated)
    async with pool.acquire() as conn:  # max_size 1: the connection that held it
        held_here = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
        assert await conn.fetchval(held_here) == 0


async def test_a_lock_held_elsewhere_is_not_taken(pool: asyncpg.Pool, migrated: MigratedSchema) -> None:
    other = await asyncpg.connect(migrated.runtime_dsn)
    try:
        assert await other.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", KEY)
        async with session_advisory_lock(pool, KEY) as held:
            assert not held
    finally:
        await other.close()
    assert await lock_is_free(migrated)


async def test_an_error_in_the_block_releases_the_lock_and_keeps_the_connection(
    pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    async with pool.acquire() as conn:
        backend = await conn.fetchval("SELECT pg_backend_pid()")
    with pytest.raises(LookupError):
        async with session_advisory_lock(pool, KEY):
            raise LookupError("the caller's own failure")
    assert await lock_is_free(migrated)
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT pg_backend_pid()") == backend


async def test_a_cancelled_holder_releases_the_lock(pool: asyncpg.Pool, migrated: MigratedSchema) -> None:
    entered = asyncio.Event()

    async def hold_forever() -> None:
        async with session_advisory_lock(pool, KEY):
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(hold_forever())
    await asyncio.wait_for(entered.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await lock_is_free(migrated)


class _UnlockInterrupted:
    """A borrowed connection whose unlock is interrupted before it is sent, as a cancellation arriving just
    then would be; everything else goes to the real connection."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)

    async def execute(self, query: str, *args: object) -> str:
        if "pg_advisory_unlock" in query:
            raise asyncio.CancelledError()
        return await self._conn.execute(query, *args)


class _PoolInterruptingUnlocks:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[_UnlockInterrupted]:
        async with self._pool.acquire() as conn:
            yield _UnlockInterrupted(conn)


async def test_an_interrupted_unlock_ends_the_session_so_no_pooled_connection_keeps_the_lock(
    pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    async with pool.acquire() as conn:
        backend = await conn.fetchval("SELECT pg_backend_pid()")
    with pytest.raises(asyncio.CancelledError):
        async with session_advisory_lock(_PoolInterruptingUnlocks(pool), KEY) as held:  # type: ignore[arg-type]
            assert held
    # The server ends the session once it reads the closed socket.
    await wait_until(lambda: lock_is_free(migrated), timeout_seconds=10, what="the lock freed")
    async with pool.acquire() as conn:  # a new connection, not the one that held the lock
        assert await conn.fetchval("SELECT pg_backend_pid()") != backend
        assert await conn.fetchval("SELECT 1") == 1
