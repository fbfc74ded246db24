"""What every media-worker contract suite runs on: a `Backend` of the PostgreSQL adapters (one migrated schema
per module, emptied before each test) or of the in-memory fakes.

A suite reads what committed only through the ports, plus `committed_events` (the outbox's event types in
commit order), so one assertion holds for both."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from media_worker.adapters.locks import AdvisoryLocks
from media_worker.adapters.memory import MemoryLocks, MemoryMedia
from media_worker.adapters.unit_of_work import PostgresMediaUnitOfWork
from media_worker.service_layer.ports import MediaLocks, UnitOfWorkFactory
from tests.support.stack import Stack, drop_schema_and_roles, migrate_test_schema, unique_name
from yovision_platform.storage import Identifier

MIGRATIONS = Path(__file__).resolve().parents[3] / "services/media-worker/src/media_worker/migrations"
MEDIA_TABLES = ("transcode_jobs", "materials", "upload_sessions", "instances", "outbox")


@dataclass(frozen=True)
class Backend:
    uow: UnitOfWorkFactory
    locks: MediaLocks
    committed_events: Callable[[], Awaitable[list[str]]]


@dataclass(frozen=True)
class MediaSchema:
    name: Identifier
    pool: asyncpg.Pool
    admin: asyncpg.Connection


@pytest.fixture(scope="module")
async def media_schema(stack: Stack) -> AsyncIterator[MediaSchema]:
    admin = await asyncpg.connect(stack.admin_dsn)
    name = Identifier(unique_name("t"))
    try:
        migrated = await migrate_test_schema(stack, admin, name, MIGRATIONS)
        pool = await asyncpg.create_pool(migrated.runtime_dsn, min_size=1, max_size=4)
        assert pool is not None
        try:
            yield MediaSchema(name, pool, admin)
        finally:
            await pool.close()
    finally:
        await drop_schema_and_roles(admin, name)
        await admin.close()


@pytest.fixture
async def postgres_backend(media_schema: MediaSchema) -> Backend:
    tables = ", ".join(f"{media_schema.name.quoted}.{table}" for table in MEDIA_TABLES)
    await media_schema.admin.execute(f"TRUNCATE {tables}")

    async def committed_events() -> list[str]:
        rows = await media_schema.pool.fetch(
            f"SELECT event_type FROM {media_schema.name.quoted}.outbox ORDER BY id"
        )
        return [r["event_type"] for r in rows]

    return Backend(
        functools.partial(PostgresMediaUnitOfWork, media_schema.pool, media_schema.name),
        AdvisoryLocks(media_schema.pool, media_schema.name),
        committed_events,
    )


@pytest.fixture
def memory_backend() -> Backend:
    media = MemoryMedia()

    async def committed_events() -> list[str]:
        return [m.event_type for m in media.outbox.committed]

    return Backend(media.unit_of_work, MemoryLocks(), committed_events)


class BackendContract:
    """The base of a contract suite on a `Backend`; its test classes pick one with `OnPostgres` or `InMemory`
    (first among their bases)."""

    @pytest.fixture
    def backend(self) -> Backend:
        raise NotImplementedError


class OnPostgres:
    @pytest.fixture
    def backend(self, postgres_backend: Backend) -> Backend:
        return postgres_backend


class InMemory:
    @pytest.fixture
    def backend(self, memory_backend: Backend) -> Backend:
        return memory_backend
