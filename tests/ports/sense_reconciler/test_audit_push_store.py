"""The `AuditPushStore` port: one holder of the fact cursor at a time (fenced on owner and epoch), facts in
id order batch by batch and window by window, the cursor's moves, backoff and dead letters. PostgreSQL and
the fake alike."""

from __future__ import annotations

import uuid

import pytest

from sense_reconciler.domain.records import AuditFact
from sense_reconciler.service_layer.ports import AuditPushStore
from tests.support.sense_backends import Backend, register, wait_for
from yovision_platform.messaging import CursorFenced, ShardLease


async def add_facts(backend: Backend, count: int) -> list[uuid.UUID]:
    """`count` device-audit facts of one new device, as the API records them (one transaction)."""
    device_id = await register(backend)
    event_ids = [uuid.uuid4() for _ in range(count)]
    async with backend.units() as uow:
        device = await uow.devices.get(device_id)
        assert device is not None
        for event_id in event_ids:
            await uow.devices.insert_fact(
                AuditFact(event_id, "device.config_changed", "operator:alice", device, ["name"])
            )
    return event_ids


async def drain(store: AuditPushStore, batch_size: int = 100) -> list[uuid.UUID]:
    """Take the cursor, read every fact after it and move the cursor past them; release it."""
    lease = await store.acquire()
    assert lease is not None
    reader = store.reader(lease, batch_size)
    seen: list[uuid.UUID] = []
    while (batch := await reader.next_batch()).facts:
        seen += [f.event_id for f in batch.facts]
        await store.record_results(lease, batch.after, [])
    await store.release(lease)
    return seen


class AuditPushStoreContract:
    @pytest.fixture
    def backend(self) -> Backend:
        raise NotImplementedError

    async def test_one_holder_at_a_time_and_a_release_frees_the_cursor(self, backend: Backend) -> None:
        a = backend.audit_push_store("pusher-a", lease_seconds=30)
        b = backend.audit_push_store("pusher-b", lease_seconds=30)
        held = await a.acquire()
        assert held is not None and held.attempts == 0 and held.retry_in_seconds == 0
        assert await b.acquire() is None
        assert await a.acquire() is None, "not even its holder takes it twice"
        assert await a.renew(held)
        await a.release(held)
        taken = await b.acquire()
        assert taken is not None and taken.epoch == held.epoch + 1 and taken.position == held.position

    async def test_facts_come_in_id_order_in_batches_then_an_empty_batch(self, backend: Backend) -> None:
        event_ids = await add_facts(backend, 5)
        store = backend.audit_push_store("pusher-a", lease_seconds=30)
        lease = await store.acquire()
        assert lease is not None
        reader = store.reader(lease, 2)
        batches = [await reader.next_batch() for _ in range(4)]
        assert [[f.event_id for f in b.facts] for b in batches] == [
            event_ids[:2],
            event_ids[2:4],
            event_ids[4:],
            [],
        ]
        assert [b.after.window_done for b in batches[:3]] == [False, False, True]
        assert [b.before for b in batches[1:3]] == [batches[0].after, batches[1].after]
        fact = batches[0].facts[0]
        assert (fact.action, fact.actor, tuple(fact.changed_fields), fact.fact_version) == (
            "device.config_changed",
            "operator:alice",
            ("name",),
            2,
        )
        assert [f.row_id for b in batches for f in b.facts] == sorted(
            f.row_id for b in batches for f in b.facts
        )

    async def test_a_reset_reads_the_same_facts_again(self, backend: Backend) -> None:
        event_ids = await add_facts(backend, 3)
        store = backend.audit_push_store("pusher-a", lease_seconds=30)
        lease = await store.acquire()
        assert lease is not None
        reader = store.reader(lease, 100)
        first = await reader.next_batch()
        reader.reset(first.before)
        again = await reader.next_batch()
        assert [f.event_id for f in again.facts] == [f.event_id for f in first.facts] == event_ids

    async def test_a_moved_cursor_is_where_the_next_holder_starts(self, backend: Backend) -> None:
        event_ids = await add_facts(backend, 3)
        store = backend.audit_push_store("pusher-a", lease_seconds=30)
        assert await store.pending() == 3
        lease = await store.acquire()
        assert lease is not None
        first = await store.reader(lease, 2).next_batch()
        await store.record_results(lease, first.after, [])
        assert await store.pending() == 1
        await store.release(lease)
        later = await add_facts(backend, 2)
        assert await store.pending() == 3
        assert await drain(backend.audit_push_store("pusher-b", lease_seconds=30)) == event_ids[2:] + later
        assert await store.pending() == 0
        assert await drain(store) == []

    async def test_facts_recorded_after_a_window_opened_come_in_a_later_one(self, backend: Backend) -> None:
        early = await add_facts(backend, 2)
        store = backend.audit_push_store("pusher-a", lease_seconds=30)
        lease = await store.acquire()
        assert lease is not None
        reader = store.reader(lease, 100)
        assert [f.event_id for f in (await reader.next_batch()).facts] == early
        late = await add_facts(backend, 2)
        assert [f.event_id for f in (await reader.next_batch()).facts] == late
        assert (await reader.next_batch()).facts == []

    async def test_dead_letters_keep_bells_code_and_the_cursor_moves_past_them(
        self, backend: Backend
    ) -> None:
        event_ids = await add_facts(backend, 3)
        store = backend.audit_push_store("pusher-a", lease_seconds=30)
        lease = await store.acquire()
        assert lease is not None
        batch = await store.reader(lease, 100).next_batch()
        rejected = [(batch.facts[0].row_id, "invalid_field"), (batch.facts[2].row_id, "id_conflict")]
        await store.record_results(lease, batch.after, rejected)
        assert await backend.dead_letters() == {event_ids[0]: "invalid_field", event_ids[2]: "id_conflict"}
        assert await store.pending() == 0

    async def test_a_failed_batch_backs_off_doubling_to_the_cap_and_a_move_clears_it(
        self, backend: Backend
    ) -> None:
        await add_facts(backend, 1)
        store = backend.audit_push_store("pusher-a", lease_seconds=30)
        lease = await store.acquire()
        assert lease is not None
        waits = [
            await store.fail_batch(lease, "server_error", base_seconds=1, cap_seconds=5) for _ in range(4)
        ]
        assert waits == pytest.approx([1, 2, 4, 5], abs=0.05)
        assert 4 < await store.retry_in() <= 5
        await store.release(lease)
        again = await store.acquire()
        assert again is not None and again.attempts == 4 and 4 < again.retry_in_seconds <= 5
        batch = await store.reader(again, 100).next_batch()
        await store.record_results(again, batch.after, [])
        assert await store.retry_in() == 0
        await store.release(again)
        cleared = await store.acquire()
        assert cleared is not None and (cleared.attempts, cleared.retry_in_seconds) == (0, 0)

    async def test_a_taken_over_holder_writes_nothing(self, backend: Backend) -> None:
        await add_facts(backend, 2)
        stale_store = backend.audit_push_store("pusher-a", lease_seconds=0.2)
        fresh_store = backend.audit_push_store("pusher-b", lease_seconds=30)
        stale = await stale_store.acquire()
        assert stale is not None
        batch = await stale_store.reader(stale, 100).next_batch()
        taken: list[ShardLease] = []

        async def taken_over() -> bool:
            lease = await fresh_store.acquire()
            taken.extend([lease] if lease is not None else [])
            return bool(taken)

        await wait_for(taken_over)
        fresh = taken[0]
        assert fresh.epoch == stale.epoch + 1 and fresh.position == stale.position
        with pytest.raises(CursorFenced):
            await stale_store.record_results(stale, batch.after, [(batch.facts[0].row_id, "id_conflict")])
        with pytest.raises(CursorFenced):
            await stale_store.fail_batch(stale, "timeout", base_seconds=1, cap_seconds=300)
        assert not await stale_store.renew(stale)
        await stale_store.release(stale)
        assert await backend.audit_push_store("pusher-c", lease_seconds=30).acquire() is None, (
            "still pusher-b's"
        )
        assert await stale_store.pending() == 2 and await backend.dead_letters() == {}
        assert await fresh_store.retry_in() == 0
        await fresh_store.record_results(fresh, batch.after, [])
        assert await fresh_store.pending() == 0


class TestPostgresAuditPushStore(AuditPushStoreContract):
    @pytest.fixture
    def backend(self, postgres_backend: Backend) -> Backend:
        return postgres_backend


class TestMemoryAuditPushStore(AuditPushStoreContract):
    @pytest.fixture
    def backend(self, memory_backend: Backend) -> Backend:
        return memory_backend
