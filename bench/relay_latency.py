"""End-to-end latency under a paced load: enqueue commit -> the event read by a read_committed consumer.

Writers (`bench.paced_writer`, their own process) enqueue with `Outbox.enqueue` at a fixed total rate, in
transactions of 10 rows over 4 connections, while one relay process (`bench.relay_worker`, shipped settings)
relays. A read_committed consumer (fetch wait 5 ms) in this process notes when each event arrives; latency
is arrival minus the moment its enqueue transaction's COMMIT returned (CLOCK_MONOTONIC, one clock for all
processes of the machine). So it
covers NOTIFY wake-up, the relay's read, the Kafka transaction, and the consumer's fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.infra import BENCH_TOPIC_PARTITIONS, REPO_ROOT, BenchSchema, BenchTopics, Stack
from bench.paced_writer import dump
from bench.relay_throughput import relay_processes, wait_split
from bench.relay_worker import DSN_ENV
from bench.stats import Latency, per_second
from yovision_platform.events import HEADER_EVENT_ID
from yovision_platform.kafka import seek_to_start
from yovision_platform.outbox import OutboxMessage

__all__ = ["PacedRun", "run_paced"]

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


async def _consume(consumer: AIOKafkaConsumer, expected: int, arrived: dict[str, float]) -> None:
    while len(arrived) < expected:
        batch = await consumer.getmany(timeout_ms=100)
        now = time.monotonic()
        for records in batch.values():
            for record in records:
                for name, value in record.headers:
                    if name == HEADER_EVENT_ID:
                        arrived.setdefault(value.decode(), now)


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
    arrived: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-paced-") as scratch:
        messages_file, result_file = Path(scratch) / "messages.jsonl", Path(scratch) / "result.json"
        dump(list(messages), messages_file)
        try:
            partitions = [TopicPartition(topic, p) for p in range(BENCH_TOPIC_PARTITIONS)]
            consumer.assign(partitions)
            await seek_to_start(consumer, partitions)
            with relay_processes(
                schema, stack.kafka_bootstrap, prefix, relays=1, client="confluent", batch_size=5000
            ):
                await wait_split(schema, 1)
                consuming = asyncio.create_task(_consume(consumer, len(messages), arrived))
                writer = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "bench.paced_writer",
                    schema.name,
                    str(rate),
                    str(messages_file),
                    str(result_file),
                    env={**os.environ, DSN_ENV: schema.dsn},
                    cwd=REPO_ROOT,
                )
                if await writer.wait() != 0:
                    raise RuntimeError("the paced writer failed")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(consuming), PACED_DRAIN_TIMEOUT_SECONDS)
                consuming.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await consuming
        finally:
            await consumer.stop()
        written = json.loads(result_file.read_text())
    committed: dict[str, float] = written["committed"]
    achieved = per_second(len(committed), written["seconds"])
    latencies = [arrived[e] - committed[e] for e in committed if e in arrived]
    return PacedRun(rate, achieved, len(messages), len(arrived), Latency.of_seconds(latencies))
