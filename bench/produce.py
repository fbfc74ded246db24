"""The baseline: raw aiokafka produce of the relay's messages with the platform's producer settings."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.messages import KafkaMessage
from bench.stats import Stopwatch, per_second
from yovision_platform.kafka import PRODUCER_LINGER_MS, RELAY_PRODUCER_LINGER_MS, start_producer

__all__ = [
    "ProduceResult",
    "RawBaseline",
    "raw_produce",
    "started_producer",
    "topic_message_count",
    "warm_up_topic",
]


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


@dataclass(frozen=True)
class RawBaseline:
    """The raw produce runs bracketing the relay drains (before and after), so both face similar noise;
    the relay is compared with their mean."""

    runs: Sequence[tuple[str, ProduceResult, int]]  # (label, result, messages the topic gained)

    @property
    def events_per_second(self) -> float:
        rates = [result.events_per_second for _, result, _ in self.runs]
        return sum(rates) / len(rates) if rates else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            **{label: {**result.as_dict(), "kafka_delivered": gained} for label, result, gained in self.runs},
            "events_per_s_mean": round(self.events_per_second),
        }


async def started_producer(
    bootstrap: str, topic: str, *, client_id: str, linger_ms: int = PRODUCER_LINGER_MS
) -> AIOKafkaProducer:
    """The platform's producer (`start_producer`: idempotent, acks=all) already holding `topic`'s
    metadata, so the timed part measures sending, not connecting. The raw baseline keeps the default linger
    (best for fire-and-forget throughput); relay runs pass the relay's own linger."""
    producer = await start_producer(bootstrap, client_id=client_id, linger_ms=linger_ms)
    await producer.partitions_for(topic)
    return producer


def relay_linger(linger_ms: int | None) -> int:
    """The linger of a relay run: the services' relay setting unless a what-if overrides it."""
    return RELAY_PRODUCER_LINGER_MS if linger_ms is None else linger_ms


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


async def warm_up_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """One message per partition of a new topic, so no timed run pays for the first appends."""
    producer = await started_producer(bootstrap, topic, client_id="bench-warm-up")
    try:
        futures = [
            await producer.send(topic, b"warm-up", key=b"bench-warm-up", partition=p)
            for p in range(partitions)
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def topic_message_count(bootstrap: str, topic: str, partitions: int) -> int:
    """Sum of the end offsets of `topic`'s partitions: every message ever appended to it."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, client_id="bench-offsets")
    await consumer.start()
    try:
        offsets = await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        await consumer.stop()
    return sum(offsets.values())
