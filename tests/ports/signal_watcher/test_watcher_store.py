"""`WatcherStore`: the PostgreSQL adapter and the fake answer alike (ownership, order and keyset paging,
edits and the baseline, status rules, the check-now spacing, due claims, leases and their fencing)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from signal_watcher.domain.model import CompareMode, Header, Method, Status, WatcherSpec
from signal_watcher.domain.records import WatcherAfterCheck, WatcherRecord
from signal_watcher.service_layer.ports import ClaimedWatcher, UnitOfWorkFactory
from tests.ports.signal_watcher.backends import Elapse, MemoryBackend, PostgresBackend, StoreContract
from yovision_platform.errors import LeaseLost
from yovision_platform.storage import Lease

SPEC = WatcherSpec(
    name="watch",
    agent_id="agent-1",
    url="https://example.com/",
    method=Method.POST,
    headers=(Header("Authorization", "Bearer s3cret"), Header("Accept", "json")),
    body="p4yload",
    interval_minutes=10,
    compare_mode=CompareMode.HASH,
    json_path=None,
    prompt_template="{diff}",
)


async def add(units: UnitOfWorkFactory, user: str = "alice", **changes: Any) -> WatcherRecord:
    async with units() as uow:
        return await uow.watchers.insert(user, replace(SPEC, **changes))


async def get(units: UnitOfWorkFactory, watcher_id: uuid.UUID, user: str = "alice") -> WatcherRecord | None:
    async with units() as uow:
        return await uow.watchers.get(user, watcher_id)


async def claim(
    units: UnitOfWorkFactory, limit: int = 100, lease_seconds: float = 60
) -> list[ClaimedWatcher]:
    async with units() as uow:
        return await uow.watchers.claim_due("owner", limit=limit, lease_seconds=lease_seconds)


async def write(
    units: UnitOfWorkFactory,
    watcher_id: uuid.UUID,
    lease: Lease,
    *,
    seconds_ago: float = 0,
    status: Status = Status.ACTIVE,
    failures: int = 0,
    minutes: int = 10,
    baseline: str | None = "h1",
    changed: bool = False,
) -> None:
    async with units() as uow:
        checked_at = await uow.now() - timedelta(seconds=seconds_ago)
        after = WatcherAfterCheck(
            checked_at,
            status,
            failures,
            checked_at + timedelta(minutes=minutes),
            baseline,
            None if baseline is None else f"excerpt of {baseline}",
            changed,
        )
        await uow.watchers.write_result(watcher_id, lease, after)


async def added_and_claimed(units: UnitOfWorkFactory) -> tuple[WatcherRecord, Lease]:
    """A new watcher of alice's, claimed (the only one due)."""
    created = await add(units)
    [claimed] = await claim(units)
    assert claimed.watcher_id == created.id
    return created, claimed.lease


async def checked(units: UnitOfWorkFactory, watcher_id: uuid.UUID, **result: Any) -> None:
    """Claim the watcher (it must be due) and record one check result for it."""
    [claimed] = [c for c in await claim(units) if c.watcher_id == watcher_id]
    await write(units, watcher_id, claimed.lease, **result)


class WatcherStoreContract(StoreContract):
    async def test_a_new_watcher_is_active_due_and_has_no_baseline(self, units: UnitOfWorkFactory) -> None:
        created = await add(units)
        async with units() as uow:
            now = await uow.now()
        assert created.spec == SPEC and created.user_id == "alice" and created.secrets_error is None
        assert (created.status, created.consecutive_failures) == (Status.ACTIVE, 0)
        assert (created.last_value_hash, created.last_value_excerpt) == (None, None)
        assert (created.last_checked_at, created.last_changed_at) == (None, None)
        assert created.next_check_at <= now and created.created_at == created.updated_at
        assert await get(units, created.id) == created

    async def test_another_users_watcher_is_not_found(self, units: UnitOfWorkFactory) -> None:
        mine = await add(units)
        async with units() as uow:
            bob = uow.watchers
            assert await bob.get("bob", mine.id) is None
            assert await bob.get("alice", uuid.uuid4()) is None
            assert await bob.update_spec("bob", mine.id, SPEC, reset_baseline=True) is None
            assert await bob.set_status("bob", mine.id, Status.PAUSED) is None
            assert await bob.request_check("bob", mine.id, min_spacing_seconds=0) is None
            assert await bob.delete("bob", mine.id) is False
        assert await get(units, mine.id) == mine

    async def test_the_count_is_per_user_and_taken_under_the_users_lock(
        self, units: UnitOfWorkFactory
    ) -> None:
        for user in ("alice", "alice", "bob"):
            await add(units, user)
        async with units() as uow:
            await uow.watchers.lock_user("alice")
            counts = [await uow.watchers.count_for_user(u) for u in ("alice", "bob", "carol")]
        assert counts == [2, 1, 0]

    async def test_lists_are_oldest_first_with_ties_by_id_and_keyset_paged(
        self, units: UnitOfWorkFactory, elapse: Elapse
    ) -> None:
        async with units() as uow:  # one transaction: one created_at
            first = [await uow.watchers.insert("alice", SPEC) for _ in range(3)]
            bobs = await uow.watchers.insert("bob", SPEC)
        await elapse(0.001)
        later = await add(units)
        expected = [*sorted(first, key=lambda r: r.id), later]
        async with units() as uow:
            listed = await uow.watchers.list_for_user("alice", limit=10)
            after = (expected[1].created_at, expected[1].id)
            rest = await uow.watchers.list_for_user("alice", limit=10, after=after)
            window = await uow.watchers.list_for_user("alice", limit=2, offset=1)
            everyone = await uow.watchers.list_all(limit=10)
            tail = await uow.watchers.list_all(limit=2, after=after)
        assert [r.id for r in listed] == [r.id for r in expected] and listed == expected
        assert [r.id for r in rest] == [r.id for r in expected[2:]]
        assert [r.id for r in window] == [r.id for r in expected[1:3]]
        early = sorted([*first, bobs], key=lambda r: r.id)
        assert [r.id for r in everyone] == [r.id for r in early] + [later.id]
        assert [r.id for r in tail] == [r.id for r in [*early, later] if (r.created_at, r.id) > after][:2]

    @pytest.mark.parametrize("offset", [0, 1, 2, 3, 4])
    @pytest.mark.parametrize("with_cursor", [False, True])
    async def test_an_offset_skips_rows_after_the_keyset_position_or_from_the_start(
        self, units: UnitOfWorkFactory, elapse: Elapse, offset: int, with_cursor: bool
    ) -> None:
        """Alice's five rows (two share a created_at), then Bob's; `after` the second, then `offset` more:
        0 and 1 at the edge, 3 at the end of Alice's (empty), 4 past it; without `after`, from the first."""
        async with units() as uow:
            tied = [await uow.watchers.insert("alice", SPEC) for _ in range(2)]
        await elapse(0.001)
        alices = [*sorted(tied, key=lambda r: r.id), *[await add(units) for _ in range(3)]]
        everyone = [*alices, await add(units, user="bob")]
        after = (alices[1].created_at, alices[1].id) if with_cursor else None
        skip = (2 if with_cursor else 0) + offset
        async with units() as uow:
            own = await uow.watchers.list_for_user("alice", limit=2, offset=offset, after=after)
            all_users = await uow.watchers.list_all(limit=2, offset=offset, after=after)
        assert [r.id for r in own] == [r.id for r in alices[skip : skip + 2]]
        assert [r.id for r in all_users] == [r.id for r in everyone[skip : skip + 2]]

    async def test_an_update_replaces_the_definition_and_resets_the_baseline_only_when_asked(
        self, units: UnitOfWorkFactory
    ) -> None:
        created = await add(units)
        await checked(units, created.id, baseline="h1", changed=True)
        renamed = replace(SPEC, name="renamed", interval_minutes=99)
        async with units() as uow:
            kept = await uow.watchers.update_spec("alice", created.id, renamed, reset_baseline=False)
        assert kept is not None and kept.spec == renamed
        assert (kept.last_value_hash, kept.last_value_excerpt) == ("h1", "excerpt of h1")
        assert kept.last_changed_at is not None and kept.updated_at >= created.updated_at
        other = replace(SPEC, headers=(Header("X-A", "1"),), body=None)
        async with units() as uow:
            reset = await uow.watchers.update_spec("alice", created.id, other, reset_baseline=True)
        assert reset is not None and reset.spec == other
        assert (reset.last_value_hash, reset.last_value_excerpt, reset.last_changed_at) == (None, None, None)
        assert reset.last_checked_at is not None and await get(units, created.id) == reset

    async def test_pausing_keeps_the_state_and_reenabling_a_disabled_watcher_resets_it(
        self, units: UnitOfWorkFactory
    ) -> None:
        created = await add(units)
        await checked(units, created.id, status=Status.DISABLED, failures=5, minutes=60)
        async with units() as uow:
            paused = await uow.watchers.set_status("alice", created.id, Status.PAUSED)
        assert paused is not None and (paused.status, paused.consecutive_failures) == (Status.PAUSED, 5)
        assert paused.last_value_hash == "h1"
        async with units() as uow:
            resumed = await uow.watchers.set_status("alice", created.id, Status.ACTIVE)
        assert resumed is not None and (resumed.consecutive_failures, resumed.last_value_hash) == (5, "h1")
        assert await claim(units) == []  # PAUSED -> ACTIVE keeps the backoff: not due
        async with units() as uow:
            await uow.watchers.set_status("alice", created.id, Status.DISABLED)
            enabled = await uow.watchers.set_status("alice", created.id, Status.ACTIVE)
            now = await uow.now()
        assert enabled is not None and enabled.status is Status.ACTIVE
        assert (enabled.consecutive_failures, enabled.last_value_hash, enabled.last_value_excerpt) == (
            0,
            None,
            None,
        )
        assert enabled.last_changed_at is None and enabled.next_check_at <= now
        assert [c.watcher_id for c in await claim(units)] == [created.id]

    async def test_a_paused_watcher_is_never_claimed(self, units: UnitOfWorkFactory) -> None:
        created = await add(units)
        async with units() as uow:
            await uow.watchers.set_status("alice", created.id, Status.PAUSED)
        assert await claim(units) == []

    @pytest.mark.parametrize(("seconds_ago", "allowed"), [(None, True), (10, True), (2, False)])
    async def test_a_check_request_is_spaced_from_the_last_check(
        self, units: UnitOfWorkFactory, seconds_ago: float | None, allowed: bool
    ) -> None:
        created = await add(units)
        if seconds_ago is not None:
            await checked(units, created.id, seconds_ago=seconds_ago, minutes=60)
        async with units() as uow:
            requested = await uow.watchers.request_check("alice", created.id, min_spacing_seconds=5)
            now = await uow.now()
        if not allowed:
            assert requested is None
            assert await claim(units) == []
            return
        assert requested is not None and requested.next_check_at <= now
        assert [c.watcher_id for c in await claim(units)] == [created.id]

    async def test_only_an_active_watcher_is_checked_on_request(self, units: UnitOfWorkFactory) -> None:
        created = await add(units)
        for status in (Status.PAUSED, Status.DISABLED):
            async with units() as uow:
                await uow.watchers.set_status("alice", created.id, status)
                assert await uow.watchers.request_check("alice", created.id, min_spacing_seconds=0) is None

    async def test_a_deleted_watcher_is_gone(self, units: UnitOfWorkFactory) -> None:
        created = await add(units)
        async with units() as uow:
            assert await uow.watchers.delete("alice", created.id) is True
            assert await uow.watchers.delete("alice", created.id) is False
            assert await uow.watchers.count_for_user("alice") == 0
        assert await get(units, created.id) is None

    async def test_due_watchers_are_claimed_earliest_first_up_to_the_limit_and_once(
        self, units: UnitOfWorkFactory, elapse: Elapse
    ) -> None:
        ids = []
        for _ in range(3):
            ids.append((await add(units)).id)
            await elapse(0.001)
        first = await claim(units, limit=2)
        assert [c.watcher_id for c in first] == ids[:2]
        assert [c.watcher_id for c in await claim(units, limit=2)] == ids[2:]
        assert await claim(units) == []  # leased
        assert len({c.lease.token for c in first}) == 2 and all(c.lease.owner == "owner" for c in first)
        with pytest.raises(ValueError, match="claim limit"):
            await claim(units, limit=0)

    async def test_a_claim_reads_the_watcher_it_leases(self, units: UnitOfWorkFactory) -> None:
        created = await add(units)
        [claimed] = await claim(units)
        assert claimed.watcher_id == created.id and claimed.record == created

    async def test_a_result_is_written_only_under_the_current_lease_and_releases_it(
        self, units: UnitOfWorkFactory
    ) -> None:
        created, lease = await added_and_claimed(units)
        with pytest.raises(LeaseLost):  # another token writes nothing
            await write(units, created.id, replace(lease, token=uuid.uuid4()), failures=5)
        await write(units, created.id, lease, failures=2, minutes=30, baseline="h2", changed=False)
        record = await get(units, created.id)
        assert record is not None and record.last_checked_at is not None
        assert record.next_check_at - record.last_checked_at == timedelta(minutes=30)
        assert (record.consecutive_failures, record.last_value_hash, record.last_value_excerpt) == (
            2,
            "h2",
            "excerpt of h2",
        )
        assert record.last_changed_at is None
        with pytest.raises(LeaseLost):  # released by the write
            await write(units, created.id, lease)

    async def test_a_change_is_dated_by_the_check(self, units: UnitOfWorkFactory) -> None:
        created = await add(units)
        await checked(units, created.id, changed=True)
        record = await get(units, created.id)
        assert record is not None and record.last_changed_at == record.last_checked_at is not None

    @pytest.mark.parametrize("edit", ["update", "status", "delete"])
    async def test_a_user_edit_takes_the_lease_so_the_check_in_flight_writes_nothing(
        self, units: UnitOfWorkFactory, edit: str
    ) -> None:
        created, lease = await added_and_claimed(units)
        async with units() as uow:
            if edit == "update":
                await uow.watchers.update_spec("alice", created.id, SPEC, reset_baseline=False)
            elif edit == "status":
                await uow.watchers.set_status("alice", created.id, Status.ACTIVE)
            else:
                await uow.watchers.delete("alice", created.id)
        with pytest.raises(LeaseLost):
            await write(units, created.id, lease, failures=3)
        record = await get(units, created.id)
        assert record is None if edit == "delete" else record is not None and record.consecutive_failures == 0

    async def test_a_check_request_leaves_the_lease_to_the_check_in_flight(
        self, units: UnitOfWorkFactory
    ) -> None:
        created, lease = await added_and_claimed(units)
        async with units() as uow:
            assert await uow.watchers.request_check("alice", created.id, min_spacing_seconds=5) is not None
        await write(units, created.id, lease)  # still the current lease

    async def test_an_expired_lease_is_claimed_again_and_the_old_one_is_fenced_off(
        self, units: UnitOfWorkFactory, elapse: Elapse
    ) -> None:
        created = await add(units)
        [first] = await claim(units, lease_seconds=0.2)
        assert await claim(units) == []
        await elapse(0.2)
        with pytest.raises(LeaseLost):  # expired: no longer current, even before anyone claims it again
            await write(units, created.id, first.lease)
        [second] = await claim(units)
        assert second.watcher_id == created.id and second.lease.token != first.lease.token
        with pytest.raises(LeaseLost):
            await write(units, created.id, first.lease)
        await write(units, created.id, second.lease)


class TestPostgresWatcherStore(PostgresBackend, WatcherStoreContract):
    pass


class TestMemoryWatcherStore(MemoryBackend, WatcherStoreContract):
    pass
