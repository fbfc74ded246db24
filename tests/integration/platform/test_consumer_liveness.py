"""`consumer_last_poll_timestamp_seconds` follows the consumer loop: it advances while the loop runs, stands
still while the loop is stuck on an await (here: its position write waits on a table lock), and moves again
once the loop is free. That is what lets the doctor and YovisionConsumerStalled see a stalled consumer."""

from __future__ import annotations

import asyncio
import time

import asyncpg
from aiokafka import AIOKafkaProducer
from prometheus_client import CollectorRegistry

from tests.integration.platform.test_idempotent_consumer import smoke
from tests.support.kafka import wait_until
from tests.support.stack import MigratedSchema, Stack, unique_name
from yovision_platform.messaging import (
    AvroSerde,
    ConsumerMetrics,
    IdempotentConsumer,
    InboundEvent,
    PositionRestoringListener,
    SchemaRegistry,
    create_consumer,
)
from yovision_platform.storage import DbConnection

STILL_SECONDS = 2.0  # how long the stuck loop is watched: well over its ~0.5 s rounds


def last_poll(registry: CollectorRegistry) -> float:
    value = registry.get_sample_value("consumer_last_poll_timestamp_seconds")
    assert value is not None
    return value


async def test_the_last_poll_gauge_stands_still_while_the_loop_is_stuck(
    stack: Stack,
    runtime_pool: asyncpg.Pool,
    admin_conn: asyncpg.Connection,
    migrated: MigratedSchema,
    topic: str,
) -> None:
    serde = AvroSerde(SchemaRegistry.load())

    async def apply(conn: DbConnection, event: InboundEvent) -> None:
        return None

    registry = CollectorRegistry()
    idempotent = IdempotentConsumer(
        runtime_pool,
        migrated.name,
        consumer_group=unique_name("g"),
        decode=serde.decode,
        handler=apply,
        metrics=ConsumerMetrics(registry),
    )
    consumer = create_consumer(stack.kafka_bootstrap, group_id=idempotent.consumer_group, client_id="live")
    consumer.subscribe([topic], listener=PositionRestoringListener(consumer, idempotent))
    await consumer.start()
    stop = asyncio.Event()
    task = asyncio.create_task(idempotent.run(consumer, stop))
    producer = AIOKafkaProducer(bootstrap_servers=stack.kafka_bootstrap)
    await producer.start()
    try:
        started = last_poll(registry)

        async def advanced_past(moment: float) -> bool:
            return last_poll(registry) > moment

        await wait_until(lambda: advanced_past(started), timeout_seconds=30)
        # a first event applied: the consumer is assigned and fetching, so the next one reaches the lock
        await producer.send_and_wait(topic, smoke(serde, "warm"), key=b"k", partition=0)

        async def applied_the_first() -> bool:
            positions = await idempotent.stored_positions()
            return any(tp.partition == 0 and n >= 1 for tp, n in positions.items())

        await wait_until(applied_the_first, timeout_seconds=60)

        lock = admin_conn.transaction()
        await lock.start()
        try:
            table = f'"{migrated.name}".consumer_positions'
            await admin_conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            await producer.send_and_wait(topic, smoke(serde, "stuck"), key=b"k", partition=0)

            async def waiting_on_the_lock() -> bool:
                waiting: int = await admin_conn.fetchval(
                    f"SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = '{table}'::regclass"
                )
                return waiting > 0

            await wait_until(waiting_on_the_lock, timeout_seconds=30)
            stuck_at = last_poll(registry)

            async def watched() -> bool:
                return time.time() > stuck_at + STILL_SECONDS

            await wait_until(watched, timeout_seconds=STILL_SECONDS + 5)
            assert last_poll(registry) == stuck_at
        finally:
            await lock.rollback()
        await wait_until(lambda: advanced_past(stuck_at), timeout_seconds=30)
    finally:
        stop.set()
        await task
        await consumer.stop()
        await producer.stop()
