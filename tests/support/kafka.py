"""Small real-Kafka helpers for tests: read a whole topic back (read_committed), publishers and a running
relay."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import asyncpg
from aiokafka import ConsumerRecord, TopicPartition

from yovision_platform.messaging import (
    KafkaTarget,
    OutboxRelay,
    OutboxRelayConfig,
    PublisherFactory,
    confluent_publisher_factory,
    plain_consumer,
    seek_to_start,
)
from yovision_platform.storage import Identifier

TEST_PUBLISHER_THREADS = 8


async def read_topic(
    kafka: KafkaTarget, topic: str, *, expected: int, partitions: int = 3, timeout_seconds: float = 30.0
) -> list[ConsumerRecord[bytes, bytes]]:
    """Read all `partitions` from the beginning, as a read_committed consumer, until `expected` records
    arrived (or the timeout)."""
    consumer = plain_consumer(
        kafka,
        enable_auto_commit=False,
        group_id=None,
        isolation_level="read_committed",
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await seek_to_start(consumer, tps)
        records: list[ConsumerRecord[bytes, bytes]] = []
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=300)
            for messages in batch.values():
                records.extend(messages)
            if len(records) >= expected and not batch:
                break
        return records
    finally:
        await consumer.stop()


@contextlib.contextmanager
def publishers(
    kafka: KafkaTarget, client_id: str = "test-relay", *, call_timeout_seconds: float = 10.0
) -> Iterator[PublisherFactory]:
    """Transactional publishers for a relay, with their executor (shut down on exit)."""
    with ThreadPoolExecutor(max_workers=TEST_PUBLISHER_THREADS) as executor:
        yield confluent_publisher_factory(
            kafka, client_id=client_id, executor=executor, call_timeout_seconds=call_timeout_seconds
        )


@contextlib.asynccontextmanager
async def running(*relays: OutboxRelay) -> AsyncIterator[None]:
    """The relays' `run` loops, stopped (and awaited) on exit."""
    stop = asyncio.Event()
    tasks = [asyncio.create_task(relay.run(stop)) for relay in relays]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks)


async def wait_until(  # type: ignore[no-untyped-def]
    predicate, timeout_seconds: float = 30.0, interval: float = 0.1, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(interval)
    raise AssertionError(f"{what} not reached in time ({timeout_seconds:.0f} s)")


async def drained(relay: OutboxRelay, timeout_seconds: float = 30.0) -> None:
    """Wait until every committed outbox row is past its shard's cursor."""

    async def empty() -> bool:
        return await relay.backlog() == 0

    await wait_until(empty, timeout_seconds=timeout_seconds)


FAST_RELAY = OutboxRelayConfig(lease_seconds=3, poll_interval_seconds=0.1)


async def publish_outbox(
    pool: asyncpg.Pool, schema: Identifier, kafka: KafkaTarget, owner: str = "test-relay"
) -> None:
    """Run a relay on `schema` until every committed outbox row is published, then stop it."""
    with publishers(kafka, owner) as factory:
        relay = OutboxRelay(pool, schema, factory, owner=owner, config=FAST_RELAY)
        async with running(relay):
            await drained(relay)
