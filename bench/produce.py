"""The baselines: raw produce of the relay's messages with aiokafka and with confluent-kafka, and a count of
what a read_committed consumer sees on a topic (the delivery check of every run)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from confluent_kafka import Producer

from bench.messages import KafkaMessage
from bench.stats import Stopwatch, per_second
from yovision_platform.messaging import KAFKA_PARTITIONER, seek_to_start, start_producer

__all__ = ["ProduceResult", "count_records", "raw_aiokafka", "raw_confluent", "warm_up_topic"]

COUNT_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class ProduceResult:
    label: str
    messages: int
    failed: int
    wall_seconds: float
    cpu_seconds: float
    delivered: int = -1  # records a read_committed consumer counted on the run's topic

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
            "kafka_delivered": self.delivered,
        }


async def raw_aiokafka(bootstrap: str, topic: str, messages: Sequence[KafkaMessage]) -> ProduceResult:
    """aiokafka with the platform's producer settings (idempotent, acks=all, linger 5 ms): send every
    message (awaiting `send`), then await every acknowledgement."""
    producer = await start_producer(bootstrap, client_id="bench-raw-aiokafka")
    await producer.partitions_for(topic)
    try:
        watch = Stopwatch().start()
        futures = [await producer.send(topic, m.value, key=m.key, headers=m.headers) for m in messages]
        results = await asyncio.gather(*futures, return_exceptions=True)
        watch.stop()
    finally:
        await producer.stop()
    failed = sum(1 for r in results if isinstance(r, BaseException))
    return ProduceResult("raw aiokafka", len(messages), failed, watch.wall_seconds, watch.cpu_seconds)


def confluent_config(bootstrap: str, client_id: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "partitioner": KAFKA_PARTITIONER,  # as the relay's publisher
    }


async def raw_confluent(bootstrap: str, topic: str, messages: Sequence[KafkaMessage]) -> ProduceResult:
    """confluent-kafka's plain Producer (idempotent, acks=all): produce every message with a per-message
    delivery callback, served by poll/flush on an executor thread, as the issue's reference run did."""
    producer = Producer(confluent_config(bootstrap, "bench-raw-confluent"))
    loop = asyncio.get_running_loop()
    failed = 0

    def delivered(error: object, _message: object) -> None:
        nonlocal failed
        if error is not None:
            failed += 1

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        await loop.run_in_executor(executor, producer.list_topics, topic, 10.0)
        watch = Stopwatch().start()
        for m in messages:
            while True:
                try:
                    producer.produce(topic, m.value, m.key, headers=list(m.headers), on_delivery=delivered)
                    break
                except BufferError:
                    await loop.run_in_executor(executor, producer.poll, 0.05)
            producer.poll(0)
        await loop.run_in_executor(executor, producer.flush, 60.0)
        watch.stop()
    return ProduceResult("raw confluent-kafka", len(messages), failed, watch.wall_seconds, watch.cpu_seconds)


async def warm_up_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """One message per partition of a new topic, so no timed run pays for the first appends."""
    producer = await start_producer(bootstrap, client_id="bench-warm-up")
    try:
        futures = [
            await producer.send(topic, b"warm-up", key=b"bench-warm-up", partition=p)
            for p in range(partitions)
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def count_records(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    expected: int = 0,
    on_record: Callable[[ConsumerRecord[bytes, bytes]], None] | None = None,
) -> int:
    """Records a read_committed consumer reads on `topic` (transaction markers and aborted batches are
    not records); keeps reading (bounded) until at least `expected` arrived. `on_record` sees each one."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        client_id="bench-count",
        enable_auto_commit=False,
        isolation_level="read_committed",
        fetch_max_bytes=64 * 1024 * 1024,
        max_partition_fetch_bytes=16 * 1024 * 1024,
    )
    await consumer.start()
    try:
        deadline = time.monotonic() + COUNT_TIMEOUT_SECONDS
        while topic not in await consumer.topics() and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.2)  # a topic created moments ago may not be in the metadata yet
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        await seek_to_start(consumer, tps)
        count = 0
        while time.monotonic() < deadline:
            positions = [await consumer.position(tp) for tp in tps]
            if all(p >= ends[tp] for p, tp in zip(positions, tps, strict=True)):
                if count >= expected:
                    break
                # Read up to the known end but short of `expected`: the end may have moved on.
                await asyncio.sleep(0.2)
                ends = await consumer.end_offsets(tps)
                continue
            batch = await consumer.getmany(timeout_ms=200, max_records=50_000)
            for records in batch.values():
                count += len(records)
                if on_record is not None:
                    for record in records:
                        on_record(record)
        return count
    finally:
        await consumer.stop()
