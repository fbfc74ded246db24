"""The audit push on the fakes: every fact reaches Bell once, oldest first; rejected facts are dead-lettered
with Bell's code; a whole-batch failure backs off by the store's clock and is retried as a whole; a pusher
whose cursor was taken over records nothing; the pipelined loop delivers a backlog exactly once."""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from collections import Counter
from collections.abc import Sequence

import pytest
from prometheus_client import CollectorRegistry

from sense_reconciler.adapters.memory import MemoryBell, MemorySense
from sense_reconciler.domain.audit_facts import OutboxFact
from sense_reconciler.domain.audit_push import AuditPushConfig
from sense_reconciler.domain.audit_push_outcome import BatchFailure, ItemResults, PushFailureCode
from sense_reconciler.domain.model import DesiredState
from sense_reconciler.domain.records import AuditFact, NewDevice
from sense_reconciler.entrypoints.audit_push_worker import AuditPushWorker
from sense_reconciler.service_layer.audit_pusher import AuditPusher
from sense_reconciler.service_layer.metrics import AuditPushMetrics
from sense_reconciler.service_layer.ports import BellPort
from sense_reconciler.service_layer.source_uris import SourceUris
from tests.unit.sense_reconciler.conftest import ManualClock, device_service
from yovision_platform.messaging import AvroSerde, SchemaRegistry
from yovision_platform.security import EncryptionKeyRing, KeyRing, SigningKey

RING = KeyRing([SigningKey("sense-1", secrets.token_bytes(32))], active_key_id="sense-1")
CONFIG = AuditPushConfig(
    "https://bell.internal", RING, lease_seconds=3.0, request_deadline_seconds=1.0, poll_interval_seconds=0.01
)


async def add_facts(sense: MemorySense, count: int, *, tenant_id: str = "tenant-a") -> list[uuid.UUID]:
    """`count` facts of one new device, recorded as the API records them."""
    event_ids = [uuid.uuid4() for _ in range(count)]
    async with sense.unit() as uow:
        await uow.sites.lock(tenant_id, "site-1", new_site_server="default")
        device = await uow.devices.add(
            NewDevice(
                uuid.uuid4(), tenant_id, "site-1", "cam", f"p-{uuid.uuid4().hex}", b"x", "enabled", "default"
            )
        )
        for event_id in event_ids:
            await uow.devices.insert_fact(
                AuditFact(event_id, "device.config_changed", "op", device, ["name"])
            )
    return event_ids


def pusher(
    sense: MemorySense,
    bell: BellPort,
    *,
    owner: str = "pusher-a",
    config: AuditPushConfig = CONFIG,
    metrics: AuditPushMetrics | None = None,
) -> AuditPusher:
    store = sense.audit_push_store(owner, lease_seconds=config.lease_seconds)
    return AuditPusher(store, bell, config, metrics=metrics)


def sent(bell: MemoryBell) -> list[uuid.UUID]:
    return [event_id for batch in bell.batches for event_id in batch]


async def test_facts_reach_bell_once_oldest_first_in_batches_of_100(sense: MemorySense) -> None:
    event_ids = await add_facts(sense, 150)
    bell = MemoryBell()
    registry = CollectorRegistry()
    worker = pusher(sense, bell, metrics=AuditPushMetrics(registry))
    first = await worker.run_once()
    assert (first.claimed, first.delivered, first.dead_lettered, first.failure) == (100, 100, 0, None)
    assert (await worker.run_once()).delivered == 50
    assert (await worker.run_once()).claimed == 0
    assert sent(bell) == event_ids and [len(b) for b in bell.batches] == [100, 50]
    assert await sense.audit_push_store("reader", lease_seconds=1).pending() == 0
    assert registry.get_sample_value("sense_audit_push_items_total", {"fate": "delivered"}) == 150


async def test_a_devices_changes_are_pushed_as_the_api_recorded_them(sense: MemorySense) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    sources = SourceUris(EncryptionKeyRing({"k1": secrets.token_bytes(32)}, "k1"))
    devices = device_service(sense, serde, sources)
    device = await devices.create_device(
        tenant_id="tenant-a",
        site_id="site-1",
        name="cam",
        path_name="site-1/cam",
        source_uri="rtsp://u:secret-pw@192.0.2.7/1",
        desired_state=DesiredState.DISABLED,
        actor="operator:alice",
    )
    await devices.set_desired_state(device.id, DesiredState.ENABLED, actor="operator:bob")
    bell = MemoryBell()
    assert (await pusher(sense, bell).run_once()).delivered == 2
    documents = list(bell.stored.values())
    assert [(d["action"], d["actor"], d["changed_fields"]) for d in documents] == [
        ("device.created", "operator:alice", ["name", "path_name", "source_uri"]),
        ("device.desired_state_changed", "operator:bob", ["desired_state"]),
    ]
    assert "secret-pw" not in repr(documents)


async def test_rejected_facts_are_dead_lettered_with_bells_code_and_the_rest_delivered(
    sense: MemorySense,
) -> None:
    good = await add_facts(sense, 2)
    invalid = await add_facts(sense, 1, tenant_id="tenant with spaces")
    conflicting = await add_facts(sense, 1)
    bell = MemoryBell()
    bell.stored[conflicting[0]] = {"another": "fact"}
    registry = CollectorRegistry()
    worker = pusher(sense, bell, metrics=AuditPushMetrics(registry))
    round_ = await worker.run_once()
    assert (round_.delivered, round_.dead_lettered) == (2, 2)
    assert (await worker.run_once()).claimed == 0
    dead = {f.event_id: sense.state.dead_letters.get(f.row_id) for f in sense.state.facts}
    assert {e: c for e, c in dead.items() if c} == {
        invalid[0]: "invalid_field",
        conflicting[0]: "id_conflict",
    }
    assert set(bell.stored) == {*good, conflicting[0]}
    assert await sense.audit_push_store("reader", lease_seconds=1).pending() == 0
    assert registry.get_sample_value("sense_audit_push_items_total", {"fate": "dead_lettered"}) == 2


@pytest.mark.parametrize("code", list(PushFailureCode))
async def test_a_whole_batch_failure_backs_off_and_retries_every_fact(
    sense: MemorySense, clock: ManualClock, code: PushFailureCode
) -> None:
    event_ids = await add_facts(sense, 3)
    bell = MemoryBell()
    bell.failures.extend([code, code])
    registry = CollectorRegistry()
    worker = pusher(sense, bell, metrics=AuditPushMetrics(registry))
    assert (await worker.run_once()).failure is code
    cursor = sense.state.cursor
    assert (cursor.attempts, cursor.last_error_code) == (1, code.value)
    assert (cursor.next_attempt_at - clock.now).total_seconds() == 1.0
    assert (await worker.run_once()).claimed == 0, "not due before the backoff ends"
    clock.advance(1.0)
    assert (await worker.run_once()).failure is code
    assert (sense.state.cursor.next_attempt_at - clock.now).total_seconds() == 2.0
    clock.advance(2.0)
    delivered = await worker.run_once()
    assert (delivered.claimed, delivered.delivered, delivered.failure) == (3, 3, None)
    assert bell.batches == [event_ids] * 3 and set(bell.stored) == set(event_ids)
    assert sense.state.cursor.attempts == 0 and sense.state.dead_letters == {}
    assert registry.get_sample_value("sense_audit_push_batch_failures_total", {"reason": code.value}) == 2


async def test_a_backoff_is_capped_at_300_seconds(sense: MemorySense, clock: ManualClock) -> None:
    await add_facts(sense, 1)
    bell = MemoryBell()
    worker = pusher(sense, bell)
    waits = []
    for _ in range(11):
        bell.failures.append(PushFailureCode.SERVER_ERROR)
        assert (await worker.run_once()).failure is PushFailureCode.SERVER_ERROR
        waits.append((sense.state.cursor.next_attempt_at - clock.now).total_seconds())
        clock.advance(waits[-1])
    assert waits == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]


class TakeOverDuringTheRequest:
    """A Bell that, while it answers, lets the lease run out and another pusher take the cursor."""

    def __init__(self, sense: MemorySense, clock: ManualClock) -> None:
        self.sense, self.clock, self.bell = sense, clock, MemoryBell()
        self.successor = sense.audit_push_store("pusher-b", lease_seconds=30)
        self.taken = False

    async def send(self, facts: Sequence[OutboxFact]) -> ItemResults | BatchFailure:
        self.clock.advance(CONFIG.lease_seconds)
        self.taken = await self.successor.acquire() is not None
        return await self.bell.send(facts)


async def test_a_pusher_whose_cursor_was_taken_during_the_request_records_nothing(
    sense: MemorySense, clock: ManualClock
) -> None:
    await add_facts(sense, 2)
    bell = TakeOverDuringTheRequest(sense, clock)
    registry = CollectorRegistry()
    round_ = await pusher(sense, bell, metrics=AuditPushMetrics(registry)).run_once()
    assert bell.taken and round_.lease_lost and round_.delivered == 0
    assert sense.state.cursor.owner == "pusher-b"
    assert await sense.audit_push_store("reader", lease_seconds=1).pending() == 2
    assert registry.get_sample_value("sense_audit_push_lease_lost_total") == 1


async def test_the_pipelined_loop_delivers_a_backlog_exactly_once_in_order(sense: MemorySense) -> None:
    event_ids = await add_facts(sense, 230)
    bell = MemoryBell()
    config = AuditPushConfig(
        "https://bell.internal",
        RING,
        batch_size=20,
        lease_seconds=3.0,
        request_deadline_seconds=1.0,
        poll_interval_seconds=0.01,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(AuditPushWorker(pusher(sense, bell, config=config)).run(stop))
    store = sense.audit_push_store("reader", lease_seconds=1)
    deadline = time.monotonic() + 10
    try:
        while await store.pending():
            assert time.monotonic() < deadline and not task.done()
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert sent(bell) == event_ids
    assert Counter(sent(bell)).most_common(1)[0][1] == 1
    assert all(len(batch) <= 20 for batch in bell.batches)
    assert sense.state.cursor.owner is None, "released on stop"


async def test_two_pushers_take_turns_on_one_cursor(sense: MemorySense) -> None:
    await add_facts(sense, 3)
    bell = MemoryBell()
    first, second = pusher(sense, bell, owner="pusher-a"), pusher(sense, bell, owner="pusher-b")
    assert (await first.run_once()).delivered == 3
    assert (await second.run_once()).claimed == 0, "the standby waits while pusher-a holds the cursor"
    later = await add_facts(sense, 1)
    assert (await first.run_once()).delivered == 1
    assert sent(bell)[-1:] == later


class CrashingOnce:
    """Bell whose first request raises a bug (no batch failure: the run crashes)."""

    def __init__(self, bell: MemoryBell) -> None:
        self.bell = bell
        self.crashed = False

    async def send(self, facts: Sequence[OutboxFact]) -> ItemResults | BatchFailure:
        if not self.crashed:
            self.crashed = True
            raise RuntimeError("bug")
        return await self.bell.send(facts)


async def test_a_crashed_run_restarts_on_the_same_pusher_and_bell_which_close_only_when_the_process_stops(
    sense: MemorySense,
) -> None:
    event_ids = await add_facts(sense, 3)
    bell = MemoryBell()
    closed: list[bool] = []

    async def close() -> None:
        closed.append(True)

    worker = AuditPushWorker(pusher(sense, CrashingOnce(bell)), close_on_stop=close)
    stop = asyncio.Event()
    with pytest.raises(RuntimeError):
        await asyncio.wait_for(worker.run(stop), 10)
    assert closed == [] and sense.state.cursor.owner is None, "released, Bell's pool kept for the restart"
    task = asyncio.create_task(worker.run(stop))
    deadline = time.monotonic() + 10
    try:
        while sent(bell) != event_ids:
            assert time.monotonic() < deadline and not task.done()
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert closed == [True]
