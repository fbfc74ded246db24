"""The platform's unit of work: the PostgreSQL adapter and the in-memory fake commit and roll back alike.

The store under test is a stand-in (`jobs` of the platform test track); each service's own suites prove
their stores the same way on top of this."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import asyncpg
import pytest

from tests.support.stack import migrate_test_schema
from yovision_platform.errors import OutboxError
from yovision_platform.localstack import LocalStack
from yovision_platform.messaging import MAX_MESSAGE_BYTES, OutboxMessage
from yovision_platform.storage import DbConnection, Identifier, MemoryUnitOfWork, PostgresUnitOfWork

FIXTURE_MIGRATIONS = Path(__file__).parents[2] / "integration" / "platform" / "fixture_migrations"

Committed = Callable[[], Awaitable[list[str]]]


class Failure(Exception):
    pass


def message(size: int = 16) -> OutboxMessage:
    return OutboxMessage(
        event_id=uuid.uuid4(), event_type="JobAdded", topic="test.jobs.v1", key=b"job", value=b"x" * size
    )


class PostgresJobs:
    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        self._conn = conn
        self._schema = schema

    async def add(self, payload: str) -> None:
        await self._conn.execute(f"INSERT INTO {self._schema.quoted}.jobs (payload) VALUES ($1)", payload)

    async def payloads(self) -> list[str]:
        rows = await self._conn.fetch(f"SELECT payload FROM {self._schema.quoted}.jobs ORDER BY id")
        return [r["payload"] for r in rows]


class PostgresJobsUnitOfWork(PostgresUnitOfWork):
    jobs: PostgresJobs

    def bind(self, conn: DbConnection) -> None:
        self.jobs = PostgresJobs(conn, self._schema)


class MemoryJobs:
    def __init__(self) -> None:
        self.rows: list[str] = []

    async def add(self, payload: str) -> None:
        self.rows.append(payload)

    async def payloads(self) -> list[str]:
        return list(self.rows)


class MemoryJobsUnitOfWork(MemoryUnitOfWork):
    def __init__(self) -> None:
        super().__init__()
        self.jobs = MemoryJobs()

    def stores(self) -> Sequence[object]:
        return (self.jobs,)


JobsUnitOfWork = PostgresJobsUnitOfWork | MemoryJobsUnitOfWork


async def add_and_announce(
    uow: JobsUnitOfWork, payload: str, announcement: OutboxMessage, *, then_fail: bool = False
) -> None:
    async with uow:
        await uow.jobs.add(payload)
        await uow.outbox.enqueue(announcement)
        if then_fail:
            raise Failure


class UnitOfWorkContract:
    @pytest.fixture
    async def uow(self) -> JobsUnitOfWork:
        raise NotImplementedError

    @pytest.fixture
    def committed_events(self, uow: JobsUnitOfWork) -> Committed:
        raise NotImplementedError

    async def test_a_normal_exit_commits_the_state_and_its_events(
        self, uow: JobsUnitOfWork, committed_events: Committed
    ) -> None:
        async with uow:
            await uow.jobs.add("a")
            await uow.outbox.enqueue(message())
        async with uow:
            assert await uow.jobs.payloads() == ["a"]
        assert await committed_events() == ["JobAdded"]

    async def test_an_exception_rolls_back_the_state_and_its_events(
        self, uow: JobsUnitOfWork, committed_events: Committed
    ) -> None:
        async with uow:
            await uow.jobs.add("kept")
        with pytest.raises(Failure):
            await add_and_announce(uow, "lost", message(), then_fail=True)
        async with uow:
            assert await uow.jobs.payloads() == ["kept"]
        assert await committed_events() == []

    @pytest.mark.parametrize("extra", [-1, 0])
    async def test_a_message_at_the_size_limit_is_accepted(
        self, uow: JobsUnitOfWork, committed_events: Committed, extra: int
    ) -> None:
        overhead = message(0).size_bytes
        async with uow:
            await uow.outbox.enqueue(message(MAX_MESSAGE_BYTES - overhead + extra))
        assert await committed_events() == ["JobAdded"]

    async def test_a_message_over_the_size_limit_is_refused_and_nothing_commits(
        self, uow: JobsUnitOfWork, committed_events: Committed
    ) -> None:
        overhead = message(0).size_bytes
        with pytest.raises(OutboxError) as refused:
            await add_and_announce(uow, "with a too large event", message(MAX_MESSAGE_BYTES - overhead + 1))
        assert refused.value.code == "message_too_large"
        async with uow:
            assert await uow.jobs.payloads() == []
        assert await committed_events() == []

    async def test_several_events_enqueued_at_once_commit_in_order_with_the_state(
        self, uow: JobsUnitOfWork, committed_events: Committed
    ) -> None:
        events = [dataclasses.replace(message(), event_type=f"Job{n}") for n in ("Added", "Queued", "Seen")]
        async with uow:
            await uow.jobs.add("a")
            await uow.outbox.enqueue(dataclasses.replace(message(), event_type="JobFirst"))
            await uow.outbox.enqueue_many(events)
            await uow.outbox.enqueue_many([])
        assert await committed_events() == ["JobFirst", "JobAdded", "JobQueued", "JobSeen"]

    async def test_one_too_large_event_among_several_refuses_them_all(
        self, uow: JobsUnitOfWork, committed_events: Committed
    ) -> None:
        overhead = message(0).size_bytes
        too_large = [message(), message(MAX_MESSAGE_BYTES - overhead + 1)]

        async def add_and_announce_all() -> None:
            async with uow:
                await uow.jobs.add("with one too large event")
                await uow.outbox.enqueue_many(too_large)

        with pytest.raises(OutboxError) as refused:
            await add_and_announce_all()
        assert refused.value.code == "message_too_large"
        async with uow:
            assert await uow.jobs.payloads() == []
        assert await committed_events() == []


class TestPostgresUnitOfWork(UnitOfWorkContract):
    @pytest.fixture
    async def pool(
        self, stack: LocalStack, admin_conn: asyncpg.Connection, schema_name: Identifier
    ) -> AsyncIterator[asyncpg.Pool]:
        migrated = await migrate_test_schema(stack, admin_conn, schema_name, FIXTURE_MIGRATIONS)
        pool = await asyncpg.create_pool(migrated.runtime_dsn, min_size=1, max_size=2)
        assert pool is not None
        yield pool
        await pool.close()

    @pytest.fixture
    async def uow(self, pool: asyncpg.Pool, schema_name: Identifier) -> JobsUnitOfWork:
        return PostgresJobsUnitOfWork(pool, schema_name)

    @pytest.fixture
    def committed_events(self, pool: asyncpg.Pool, schema_name: Identifier) -> Committed:
        async def read() -> list[str]:
            rows = await pool.fetch(f"SELECT event_type FROM {schema_name.quoted}.outbox ORDER BY id")
            return [r["event_type"] for r in rows]

        return read

    @pytest.mark.parametrize("fails", [False, True])
    async def test_the_connection_goes_back_to_the_pool(
        self, uow: JobsUnitOfWork, pool: asyncpg.Pool, fails: bool
    ) -> None:
        assert isinstance(uow, PostgresJobsUnitOfWork)
        with pytest.raises(Failure) if fails else contextlib.nullcontext():
            async with uow:
                assert uow.connection.is_in_transaction()
                if fails:
                    raise Failure
        assert pool.get_idle_size() == pool.get_size()
        with pytest.raises(RuntimeError):
            _ = uow.connection


class TestMemoryUnitOfWork(UnitOfWorkContract):
    @pytest.fixture
    async def uow(self) -> JobsUnitOfWork:
        return MemoryJobsUnitOfWork()

    @pytest.fixture
    def committed_events(self, uow: JobsUnitOfWork) -> Committed:
        assert isinstance(uow, MemoryJobsUnitOfWork)

        async def read() -> list[str]:
            return uow.outbox.event_types()

        return read


class TestJoinedPostgresUnitOfWork:
    """`joining`: the caller's transaction decides; the unit of work neither commits nor rolls back."""

    @pytest.fixture
    async def conn(
        self, stack: LocalStack, admin_conn: asyncpg.Connection, schema_name: Identifier
    ) -> AsyncIterator[asyncpg.Connection]:
        migrated = await migrate_test_schema(stack, admin_conn, schema_name, FIXTURE_MIGRATIONS)
        conn = await asyncpg.connect(migrated.runtime_dsn)
        yield conn
        await conn.close()

    @pytest.mark.parametrize("owner_commits", [True, False])
    async def test_the_owners_transaction_decides(
        self, conn: asyncpg.Connection, schema_name: Identifier, owner_commits: bool
    ) -> None:
        transaction = conn.transaction()
        await transaction.start()
        async with PostgresJobsUnitOfWork.joining(conn, schema_name) as uow:
            await uow.jobs.add("joined")
            await uow.outbox.enqueue(message())
        assert conn.is_in_transaction(), "the joined unit of work ended the owner's transaction"
        await (transaction.commit() if owner_commits else transaction.rollback())
        expected = (["joined"], 1) if owner_commits else ([], 0)
        jobs = [r["payload"] for r in await conn.fetch(f"SELECT payload FROM {schema_name.quoted}.jobs")]
        outbox = await conn.fetchval(f"SELECT count(*) FROM {schema_name.quoted}.outbox")
        assert (jobs, outbox) == expected

    async def test_it_refuses_a_connection_outside_a_transaction(
        self, conn: asyncpg.Connection, schema_name: Identifier
    ) -> None:
        with pytest.raises(OutboxError) as refused:
            await PostgresJobsUnitOfWork.joining(conn, schema_name).__aenter__()
        assert refused.value.code == "outbox_outside_transaction"
