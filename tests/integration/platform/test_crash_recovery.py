"""The relay is SIGKILLed mid-batch and restarted: every event arrives, and the idempotent consumer
applies each exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import asyncpg

from tests.support.kafka import read_topic, wait_until
from tests.support.stack import MigratedSchema, Stack, unique_name
from yovision_platform.messaging import (
    AvroSerde,
    IdempotentConsumer,
    InboundEvent,
    Outbox,
    OutboxMessage,
    OutboxRelay,
    PositionRestoringListener,
    SchemaRegistry,
    TransactionalPublisher,
    build_event,
    create_consumer,
    fetch_end_offsets,
)

EVENTS = 2000
KEYS = 50
RELAY_SCRIPT = Path(__file__).with_name("relay_process.py")


def start_relay(migrated: MigratedSchema, stack: Stack, owner: str, *hook: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TEST_RUNTIME_DSN": migrated.runtime_dsn, "TEST_LEASE_SECONDS": "4"}
    return subprocess.Popen(
        [sys.executable, str(RELAY_SCRIPT), migrated.name, stack.kafka_bootstrap, owner, *hook],
        env=env,
        cwd=Path(__file__).resolve().parents[3],
    )


async def test_relay_killed_mid_batch_loses_nothing_and_consumer_applies_each_once(
    stack: Stack, runtime_pool: asyncpg.Pool, migrated: MigratedSchema, topic: str, tmp_path: Path
) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    outbox = Outbox(migrated.name)
    order: dict[bytes, list[str]] = defaultdict(list)
    async with runtime_pool.acquire() as conn, conn.transaction():
        for i in range(EVENTS):
            run_id = f"run-{i % KEYS}"
            event = build_event(
                serde,
                "SmokeTestEvent",
                run_id,
                {"run_id": run_id, "produced_by": "crash-test", "note": str(i)},
                "platform",
            )
            await outbox.enqueue(conn, OutboxMessage.from_event(event, topic=topic))
            order[event.key].append(str(event.event_id))

    marker = tmp_path / "hung"
    doomed = start_relay(migrated, stack, "relay-doomed", "--hang-after-commit", "5", str(marker))
    try:

        async def hung() -> bool:
            return marker.exists() and marker.read_text() != ""

        await wait_until(hung, timeout_seconds=60)
        in_flight = int(marker.read_text())
        assert in_flight > 0, "a batch committed to Kafka, its cursor not advanced"
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()

    survivor = start_relay(migrated, stack, "relay-survivor")
    pruner = OutboxRelay(runtime_pool, migrated.name, unusable_publishers, owner="observer")
    try:

        async def all_published() -> bool:
            return await pruner.backlog() == 0

        await wait_until(all_published, timeout_seconds=90)
    finally:
        survivor.send_signal(signal.SIGTERM)
        assert survivor.wait(timeout=30) == 0

    records = await read_topic(stack.kafka_bootstrap, topic, expected=EVENTS + in_flight)
    assert len(records) >= EVENTS + in_flight, "the killed batch is published again: duplicates, not losses"
    first_seen: dict[bytes, list[str]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert record.key is not None and record.value is not None
        event_id = serde.decode(record.value).event_id
        if event_id not in first_seen[record.key]:
            first_seen[record.key].append(event_id)
    assert first_seen == order, "per-key order survives the crash"

    async def apply(conn: asyncpg.Connection, event: InboundEvent) -> None:
        await conn.execute(
            f"""INSERT INTO "{migrated.name}".applied_effects (event_id, event_type) VALUES ($1, $2)
                ON CONFLICT (event_id) DO UPDATE SET applied = applied_effects.applied + 1""",
            event.event_id,
            event.event_type,
        )

    idempotent = IdempotentConsumer(
        runtime_pool, migrated.name, consumer_group=unique_name("g"), decode=serde.decode, handler=apply
    )
    consumer = create_consumer(
        stack.kafka_bootstrap, group_id=idempotent.consumer_group, client_id="crash-test"
    )
    consumer.subscribe([topic], listener=PositionRestoringListener(consumer, idempotent))
    await consumer.start()
    stop = asyncio.Event()
    task = asyncio.create_task(idempotent.run(consumer, stop))
    try:
        ends = await fetch_end_offsets(stack.kafka_bootstrap, [topic], client_id="crash-test-ends")

        async def caught_up() -> bool:
            # End offsets count the transaction markers too: the stored positions must pass them.
            positions = await idempotent.stored_positions()
            return all(positions.get(tp, 0) >= end for tp, end in ends.items())

        await wait_until(caught_up, timeout_seconds=60)
    finally:
        stop.set()
        await task
        await consumer.stop()
    stats = await runtime_pool.fetchrow(
        f"SELECT count(*) AS events, max(applied) AS most, min(applied) AS least "
        f'FROM "{migrated.name}".applied_effects'
    )
    assert dict(stats) == {"events": EVENTS, "most": 1, "least": 1}


def unusable_publishers(transactional_id: str) -> TransactionalPublisher:
    raise AssertionError("this relay only reads the backlog")
