"""The baseline: raw aiokafka produce of the relay's messages with the platform's producer settings."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.messages import KafkaMessage
from bench.stats import Stopwatch, per_second
from yovision_platform.kafka import start_producer

__all__ = ["ProduceResult", "raw_produce", "started_producer", "topic_message_count"]


@dataclass(frozen=True)
class ProduceResult:
    messages: int
    failed: int
    wall_seconds: float
    cpu_seconds: float

    @property
    def events_per_second(self) -> float:
        return per_second(self.messages - self.failed, self.wall_seconds)

    def as_dict(self) -> dict[str, object]:
        return {
            "messages": self.messages,
            "failed": self.failed,
            "events_per_s": round(self.events_per_second),
            "wall_s": round(self.wall_seconds, 3),
            "cpu_s": round(self.cpu_seconds, 3),
        }


async def started_producer(bootstrap: str, topic: str, *, client_id: str) -> AIOKafkaProducer:
    """An idempotent acks=all producer (`start_producer`) that already holds `topic`'s metadata, so the
    timed part measures sending, not connecting."""
    producer = await start_producer(bootstrap, client_id=client_id)
    await producer.partitions_for(topic)
    return producer


async def raw_produce(bootstrap: str, messages: Sequence[KafkaMessage]) -> ProduceResult:
    """Send every message (awaiting `send`, as the relay does), then await every acknowledgement."""
    producer = await started_producer(bootstrap, messages[0].topic, client_id="bench-raw")
    try:
        watch = Stopwatch().start()
        futures = [await producer.send(m.topic, m.value, key=m.key, headers=m.headers) for m in messages]
        results = await asyncio.gather(*futures, return_exceptions=True)
        watch.stop()
    finally:
        await producer.stop()
    failed = sum(1 for r in results if isinstance(r, BaseException))
    return ProduceResult(len(messages), failed, watch.wall_seconds, watch.cpu_seconds)


async def topic_message_count(bootstrap: str, topic: str, partitions: int) -> int:
    """Sum of the end offsets of `topic`'s partitions: every message ever appended to it."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, client_id="bench-offsets")
    await consumer.start()
    try:
        offsets = await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        await consumer.stop()
    return sum(offsets.values())
