"""Small real-Kafka helpers for tests: read a whole topic back, build producers for a relay."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition

from yovision_platform.kafka import start_producer


async def read_topic(
    bootstrap: str, topic: str, *, expected: int, partitions: int = 3, timeout_seconds: float = 30.0
) -> list[ConsumerRecord[bytes, bytes]]:
    """Read all `partitions` from the beginning until `expected` records arrived (or the timeout)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
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


def producer_factory(bootstrap: str, client_id: str = "test-relay"):  # type: ignore[no-untyped-def]
    async def factory() -> AIOKafkaProducer:
        return await start_producer(bootstrap, client_id=client_id, linger_ms=0)

    return factory


async def wait_until(predicate, timeout_seconds: float = 30.0, interval: float = 0.1) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(interval)
    raise AssertionError("condition not reached in time")
