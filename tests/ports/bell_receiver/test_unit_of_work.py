"""`BellUnitOfWork`: the three stores commit together on a normal exit and roll back together on an
exception (both adapters); `PostgresBellUnitOfWork.joining` works in the IdempotentConsumer's open
transaction."""

from __future__ import annotations

import contextlib
import hashlib
import uuid

import asyncpg
import pytest

from bell_receiver.adapters.audit_reader import PostgresAuditReader
from bell_receiver.adapters.unit_of_work import PostgresBellUnitOfWork
from bell_receiver.domain.audit import AuditFilter, Channel
from bell_receiver.domain.inbox import NewNotification
from bell_receiver.domain.receipts import Receipt
from bell_receiver.service_layer.ports import BellUnitOfWork
from tests.ports.bell_receiver.harness import Harness, MemoryHarness, PostgresHarness
from tests.support.bell_samples import T0, audit_row
from yovision_platform.errors import OutboxError
from yovision_platform.storage import Identifier


class Failure(Exception):
    pass


def notification() -> NewNotification:
    return NewNotification("alice", "WATCHER_DISABLED", "signal", uuid.uuid4(), T0, {"watcher_name": "w"})


async def write_all(uow: BellUnitOfWork, *, then_fail: bool = False) -> None:
    async with uow:
        await uow.audit_trail.append([audit_row(source="signal")], Channel.KAFKA)
        await uow.inbox.add(notification())
        await uow.receipts.store("k1", "n1", Receipt(hashlib.sha256(b"x").digest(), 200, b"x"))
        if then_fail:
            raise Failure


async def written(bell: Harness) -> tuple[int, int, bool]:
    async with bell.uow() as uow:
        inbox = await uow.inbox.page("alice", 10, None)
        receipt = await uow.receipts.find_live("k1", "n1")
    return len(await bell.reader.page(AuditFilter(), 10, None)), len(inbox), receipt is not None


class BellUnitOfWorkContract:
    @pytest.fixture
    async def bell(self) -> Harness:
        raise NotImplementedError

    async def test_a_normal_exit_commits_every_store(self, bell: Harness) -> None:
        await write_all(bell.uow())
        assert await written(bell) == (1, 1, True)

    async def test_an_exception_rolls_back_every_store(self, bell: Harness) -> None:
        with pytest.raises(Failure):
            await write_all(bell.uow(), then_fail=True)
        assert await written(bell) == (0, 0, False)


class TestPostgresBellUnitOfWork(PostgresHarness, BellUnitOfWorkContract):
    @pytest.mark.parametrize("consumer_rejects", [False, True])
    async def test_the_consumer_unit_of_work_commits_and_rolls_back_with_the_consumers_transaction(
        self, pool: asyncpg.Pool, schema_name: Identifier, consumer_rejects: bool
    ) -> None:
        async with pool.acquire() as conn, conn.transaction():
            with pytest.raises(Failure) if consumer_rejects else contextlib.nullcontext():
                async with conn.transaction():  # the consumer's per-message savepoint
                    await write_all(
                        PostgresBellUnitOfWork.joining(conn, schema_name), then_fail=consumer_rejects
                    )
        stored = await PostgresAuditReader(pool, schema_name).page(AuditFilter(), 10, None)
        assert len(stored) == (0 if consumer_rejects else 1)

    async def test_the_consumer_unit_of_work_needs_an_open_transaction(
        self, pool: asyncpg.Pool, schema_name: Identifier
    ) -> None:
        async with pool.acquire() as conn:
            with pytest.raises(OutboxError, match="open transaction"):
                await PostgresBellUnitOfWork.joining(conn, schema_name).__aenter__()


class TestMemoryBellUnitOfWork(MemoryHarness, BellUnitOfWorkContract):
    pass
