"""The services' own path on fresh topics, many times over (issue 25): a topic made moments ago, outbox
rows published to it at once by the shipped relay, consumed by the platform's idempotent consumer under a
new group. Each round applies every event exactly once: the consumer's positions come from the database
(`seek`) or its earliest-offset default, never from an on-demand reset, so aiokafka's reset race
(test_read_from_start.py) cannot start it at the end."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from tests.support.kafka import publish_outbox, wait_until
from tests.support.stack import MigratedSchema, Stack, create_topic, delete_topic
from yovision_platform.messaging import (
    AvroSerde,
    IdempotentConsumer,
    InboundEvent,
    Outbox,
    OutboxMessage,
    SchemaRegistry,
    build_event,
)

ROUNDS = 6
EVENTS = 120
PARTITIONS = 3


async def test_events_published_at_once_to_fresh_topics_are_each_applied_once(
    stack: Stack, runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    outbox = Outbox(migrated.name)
    table = f'"{migrated.name}".applied_effects'

    async def apply(conn: asyncpg.Connection, event: InboundEvent) -> None:
        await conn.execute(
            f"""INSERT INTO {table} (event_id, event_type) VALUES ($1, $2)
                ON CONFLICT (event_id) DO UPDATE SET applied = applied_effects.applied + 1""",
            event.event_id,
            event.event_type,
        )

    for round_ in range(ROUNDS):
        topic = f"test.fresh.{uuid.uuid4().hex[:10]}.v1"
        await create_topic(stack.kafka_bootstrap, topic, partitions=PARTITIONS)
        try:
            async with runtime_pool.acquire() as conn, conn.transaction():
                for n in range(EVENTS):
                    run_id = f"run-{n % 30}"
                    event = build_event(
                        serde,
                        "SmokeTestEvent",
                        run_id,
                        {"run_id": run_id, "produced_by": "fresh-topics", "note": str(n)},
                        "platform",
                    )
                    await outbox.enqueue(conn, OutboxMessage.from_event(event, topic=topic))
            await publish_outbox(runtime_pool, migrated.name, stack.kafka_bootstrap)
            consumer = IdempotentConsumer(
                runtime_pool,
                migrated.name,
                consumer_group=f"fresh-{round_}",
                decode=serde.decode,
                handler=apply,
            )
            stop = asyncio.Event()
            task = asyncio.create_task(
                consumer.consume_topics(stack.kafka_bootstrap, [topic], stop, client_id="fresh-topics")
            )
            expected = EVENTS * (round_ + 1)

            async def all_applied(expected: int = expected) -> bool:
                return await runtime_pool.fetchval(f"SELECT count(*) FROM {table}") == expected

            try:
                await wait_until(all_applied, timeout_seconds=60)
            finally:
                stop.set()
                await asyncio.wait_for(task, 30)
        finally:
            await delete_topic(stack.kafka_bootstrap, topic)
    assert await runtime_pool.fetchval(f"SELECT count(*) FROM {table} WHERE applied <> 1") == 0
