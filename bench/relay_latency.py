"""End-to-end latency under a paced load: enqueue commit -> the event read by a read_committed consumer.

Writers enqueue with `Outbox.enqueue` at a fixed total rate, in transactions of PACED_TRANSACTION_ROWS,
over PACED_WRITERS connections, while one relay process (`bench.relay_worker`, shipped settings) relays.
A read_committed consumer (fetch wait 5 ms) in this process notes when each event arrives; latency is
arrival minus the moment its enqueue transaction's COMMIT returned, both on this process's clock. So it
covers NOTIFY wake-up, the relay's read, the Kafka transaction, and the consumer's fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.infra import BENCH_TOPIC_PARTITIONS, BenchSchema, BenchTopics, Stack
from bench.relay_throughput import relay_processes, wait_split
from bench.stats import Latency, per_second
from yovision_platform.events import HEADER_EVENT_ID
from yovision_platform.outbox import Outbox, OutboxMessage

__all__ = ["PacedRun", "run_paced"]

PACED_TRANSACTION_ROWS = 10
PACED_WRITERS = 4
PACED_DRAIN_TIMEOUT_SECONDS = 30.0
CONSUMER_FETCH_WAIT_MS = 5


@dataclass(frozen=True)
class PacedRun:
    target_rate: float
    achieved_rate: float
    rows: int
    received: int
    latency: Latency

    def as_dict(self) -> dict[str, object]:
        return {
            "target_rate_per_s": round(self.target_rate),
            "achieved_rate_per_s": round(self.achieved_rate),
            "rows": self.rows,
            "received": self.received,
            "latency": self.latency.as_dict(),
        }


async def _write(
    schema: BenchSchema, messages: Sequence[OutboxMessage], rate: float, committed: dict[uuid.UUID, float]
) -> None:
    outbox = Outbox(schema.name)
    started = time.perf_counter()
    async with schema.pool.acquire() as conn:
        for offset in range(0, len(messages), PACED_TRANSACTION_ROWS):
            delay = started + offset / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            # Keys in a stable order within a transaction, as Outbox.enqueue asks: concurrent writers of
            # the same keys would deadlock otherwise.
            chunk = sorted(messages[offset : offset + PACED_TRANSACTION_ROWS], key=lambda m: m.key)
            async with conn.transaction():
                for message in chunk:
                    await outbox.enqueue(conn, message)
            now = time.perf_counter()
            for message in chunk:
                committed[message.event_id] = now


async def _consume(consumer: AIOKafkaConsumer, expected: int, arrived: dict[uuid.UUID, float]) -> None:
    while len(arrived) < expected:
        batch = await consumer.getmany(timeout_ms=100)
        now = time.perf_counter()
        for records in batch.values():
            for record in records:
                for name, value in record.headers:
                    if name == HEADER_EVENT_ID:
                        arrived.setdefault(uuid.UUID(value.decode()), now)


async def run_paced(
    stack: Stack, schema: BenchSchema, topics: BenchTopics, messages: Sequence[OutboxMessage], *, rate: float
) -> PacedRun:
    prefix = f"paced{round(rate)}"
    topic = await topics.for_run(prefix)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=stack.kafka_bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        fetch_max_wait_ms=CONSUMER_FETCH_WAIT_MS,
    )
    await consumer.start()
    committed: dict[uuid.UUID, float] = {}
    arrived: dict[uuid.UUID, float] = {}
    try:
        partitions = [TopicPartition(topic, p) for p in range(BENCH_TOPIC_PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        with relay_processes(
            schema, stack.kafka_bootstrap, prefix, relays=1, client="confluent", batch_size=2000
        ):
            await wait_split(schema, 1)
            consuming = asyncio.create_task(_consume(consumer, len(messages), arrived))
            started = time.perf_counter()
            share = len(messages) // PACED_WRITERS + 1
            await asyncio.gather(
                *(
                    _write(schema, messages[w * share : (w + 1) * share], rate / PACED_WRITERS, committed)
                    for w in range(PACED_WRITERS)
                )
            )
            achieved = per_second(len(messages), time.perf_counter() - started)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(consuming), PACED_DRAIN_TIMEOUT_SECONDS)
            consuming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await consuming
    finally:
        await consumer.stop()
    latencies = [arrived[e] - committed[e] for e in committed if e in arrived]
    return PacedRun(rate, achieved, len(messages), len(arrived), Latency.of_seconds(latencies))
