"""`SignalUnitOfWork`: the watchers, the check log and the outbox commit together or not at all, and the
store's clock stands still within one unit of work, in both adapters."""

from __future__ import annotations

import uuid

import pytest

from signal_watcher.domain.records import CheckRow
from signal_watcher.service_layer.ports import UnitOfWorkFactory
from tests.ports.signal_watcher.backends import CommittedEvents, MemoryBackend, PostgresBackend, StoreContract
from tests.ports.signal_watcher.test_watcher_store import SPEC
from yovision_platform.messaging import OutboxMessage


class Failure(Exception):
    pass


def message() -> OutboxMessage:
    return OutboxMessage(
        event_id=uuid.uuid4(), event_type="WatcherTriggered", topic="test.t.v1", key=b"w", value=b"x"
    )


async def write_all(units: UnitOfWorkFactory, *, then_fail: bool) -> uuid.UUID:
    async with units() as uow:
        record = await uow.watchers.insert("alice", SPEC)
        now = await uow.now()
        await uow.checks.insert(CheckRow(uuid.uuid4(), record.id, now, 200, "h", False, None, None, 1, None))
        await uow.outbox.enqueue(message())
        if then_fail:
            raise Failure
    return record.id


class SignalUnitOfWorkContract(StoreContract):
    async def test_a_normal_exit_commits_watcher_check_and_event(
        self, units: UnitOfWorkFactory, committed_events: CommittedEvents
    ) -> None:
        watcher_id = await write_all(units, then_fail=False)
        async with units() as uow:
            assert await uow.watchers.get("alice", watcher_id) is not None
            assert len(await uow.checks.list_for_watcher(watcher_id, limit=10)) == 1
        assert await committed_events() == ["WatcherTriggered"]

    async def test_an_exception_rolls_back_watcher_check_and_event(
        self, units: UnitOfWorkFactory, committed_events: CommittedEvents
    ) -> None:
        with pytest.raises(Failure):
            await write_all(units, then_fail=True)
        async with units() as uow:
            assert await uow.watchers.count_for_user("alice") == 0
            assert await uow.watchers.list_all(limit=10) == []
        assert await committed_events() == []

    async def test_the_clock_stands_still_within_a_unit_of_work(self, units: UnitOfWorkFactory) -> None:
        async with units() as uow:
            first = await uow.now()
            record = await uow.watchers.insert("alice", SPEC)
            second = await uow.now()
        async with units() as uow:
            later = await uow.now()
        assert first == second == record.created_at == record.next_check_at and later >= first
        assert first.tzinfo is not None


class TestPostgresSignalUnitOfWork(PostgresBackend, SignalUnitOfWorkContract):
    pass


class TestMemorySignalUnitOfWork(MemoryBackend, SignalUnitOfWorkContract):
    pass
