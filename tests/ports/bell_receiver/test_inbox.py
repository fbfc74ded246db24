"""`InboxStore`: one entry per (source_system, event_id), a user's own entries only, newest first by
(occurred_at, id) with keyset continuation, and read marks that keep the first read time."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from bell_receiver.domain.inbox import NewNotification, NotificationRow
from bell_receiver.domain.paging import PagePosition
from tests.ports.bell_receiver.harness import Harness, MemoryHarness, PostgresHarness

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def note(
    user: str, n: int, *, second: int | None = None, event_id: uuid.UUID | None = None
) -> NewNotification:
    return NewNotification(
        user_id=user,
        kind="WATCHER_DISABLED",
        source_system="signal",
        event_id=event_id or uuid.uuid4(),
        occurred_at=T0 + timedelta(seconds=n if second is None else second),
        data={"watcher_name": f"w{n}", "consecutive_failures": 5, "last_error_code": None},
    )


class InboxContract:
    @pytest.fixture
    async def bell(self) -> Harness:
        raise NotImplementedError

    async def add(self, bell: Harness, *notes: NewNotification) -> None:
        async with bell.uow() as uow:
            for one in notes:
                await uow.inbox.add(one)

    async def page(
        self, bell: Harness, user: str, limit: int = 100, after: PagePosition | None = None
    ) -> list[NotificationRow]:
        async with bell.uow() as uow:
            return await uow.inbox.page(user, limit, after)

    async def test_an_entry_reads_back_as_added_and_unread(self, bell: Harness) -> None:
        added = note("alice", 1)
        await self.add(bell, added)
        [read] = await self.page(bell, "alice")
        assert (read.user_id, read.kind, read.source_system, read.event_id, read.occurred_at) == (
            "alice",
            "WATCHER_DISABLED",
            "signal",
            added.event_id,
            added.occurred_at,
        )
        assert dict(read.data) == {"watcher_name": "w1", "consecutive_failures": 5, "last_error_code": None}
        assert read.read_at is None

    async def test_a_redelivered_event_adds_nothing(self, bell: Harness) -> None:
        first = note("alice", 1)
        await self.add(bell, first)
        await self.add(bell, note("bob", 2, event_id=first.event_id))
        assert [r.event_id for r in await self.page(bell, "alice")] == [first.event_id]
        assert await self.page(bell, "bob") == []

    async def test_a_user_sees_only_their_own_newest_first(self, bell: Harness) -> None:
        await self.add(bell, note("alice", 1), note("bob", 2), note("alice", 3), note("alice", 0))
        assert [r.data["watcher_name"] for r in await self.page(bell, "alice")] == ["w3", "w1", "w0"]
        assert [r.data["watcher_name"] for r in await self.page(bell, "alice", limit=2)] == ["w3", "w1"]
        assert await self.page(bell, "nobody") == []

    async def test_pages_continue_after_a_position_without_repeats_or_gaps_on_equal_times(
        self, bell: Harness
    ) -> None:
        await self.add(bell, *(note("alice", n, second=n // 2) for n in range(5)))
        everything = await self.page(bell, "alice")
        seen: list[int] = []
        after: PagePosition | None = None
        while page := await self.page(bell, "alice", limit=2, after=after):
            seen += [r.id for r in page]
            after = PagePosition(page[-1].occurred_at, page[-1].id)
        assert seen == [r.id for r in everything] and len(seen) == 5
        keys = [(r.occurred_at, r.id) for r in everything]
        assert keys == sorted(keys, reverse=True)

    async def test_read_marks_keep_the_first_read_time_and_can_be_undone(self, bell: Harness) -> None:
        await self.add(bell, note("alice", 1))
        [entry] = await self.page(bell, "alice")
        async with bell.uow() as uow:
            assert await uow.inbox.set_read("alice", entry.id, read=True)
        [read] = await self.page(bell, "alice")
        assert read.read_at is not None
        async with bell.uow() as uow:
            assert await uow.inbox.set_read("alice", entry.id, read=True)
        assert (await self.page(bell, "alice"))[0].read_at == read.read_at
        async with bell.uow() as uow:
            assert await uow.inbox.set_read("alice", entry.id, read=False)
            assert await uow.inbox.set_read("alice", entry.id, read=False)
        assert (await self.page(bell, "alice"))[0].read_at is None

    @pytest.mark.parametrize("read", [True, False])
    async def test_another_users_or_an_unknown_id_is_not_found_and_unchanged(
        self, bell: Harness, read: bool
    ) -> None:
        await self.add(bell, note("alice", 1))
        [entry] = await self.page(bell, "alice")
        async with bell.uow() as uow:
            assert not await uow.inbox.set_read("mallory", entry.id, read=read)
            assert not await uow.inbox.set_read("alice", entry.id + 1000, read=read)
        assert (await self.page(bell, "alice"))[0].read_at is None


class TestPostgresInbox(PostgresHarness, InboxContract):
    pass


class TestMemoryInbox(MemoryHarness, InboxContract):
    pass
