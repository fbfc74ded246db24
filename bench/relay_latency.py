"""End-to-end latency under a paced load: enqueue commit -> the event read by a read_committed consumer.

Writers (`bench.paced_writer`, their own process) write transactions of 10 events with
`Outbox.enqueue_many` (one round trip, as a use case recording several events does) at a fixed total rate
over 4 connections, while one relay process (`bench.relay_worker`, shipped settings) relays. Before the
clock starts, one event per shard goes through, so each shard's producer has finished `init_transactions`
and the figures are those of a running relay. A read_committed consumer (fetch wait 5 ms) in this process
notes when each event arrives; latency is arrival minus the moment its transaction's COMMIT returned
(CLOCK_MONOTONIC, one clock for all processes of the machine). So it covers NOTIFY wake-up, the relay's
read, the Kafka transaction, and the consumer's fetch.
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
from bench.messages import build_messages
from bench.paced_writer import dump
from bench.relay_throughput import relay_processes, wait_split
from bench.relay_worker import DSN_ENV
from bench.stats import Latency, per_second
from yovision_platform.messaging import (
    HEADER_EVENT_ID,
    OUTBOX_SHARDS,
    Outbox,
    OutboxMessage,
    partition_for_key,
    seek_to_start,
)

__all__ = ["PacedRun", "run_paced"]

PACED_DRAIN_TIMEOUT_SECONDS = 30.0
WARM_UP_CANDIDATES = 200
WARM_UP_SEED = 1
WARM_UP_TIMEOUT_SECONDS = 30.0
CONSUMER_FETCH_WAIT_MS = 5


@dataclass(frozen=True)
class PacedRun:
    target_rate: float
    achieved_rate: float
    rows: int
    received: int
    latency: Latency
    transactions: int  # Kafka transactions the relay committed for the measured rows
    seconds: float

    @property
    def rows_per_transaction(self) -> float:
        return self.rows / self.transactions if self.transactions > 0 else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "target_rate_per_s": round(self.target_rate),
            "achieved_rate_per_s": round(self.achieved_rate),
            "rows": self.rows,
            "received": self.received,
            "latency": self.latency.as_dict(),
            "transactions": self.transactions,
            "transactions_per_s": round(per_second(self.transactions, self.seconds)),
        }


async def _consume(consumer: AIOKafkaConsumer, wanted: set[str], arrived: dict[str, float]) -> None:
    """Note each event's arrival time until every id of `wanted` has arrived."""
    missing = set(wanted)
    while missing:
        batch = await consumer.getmany(timeout_ms=100)
        now = time.monotonic()
        for records in batch.values():
            for record in records:
                for name, value in record.headers:
                    if name == HEADER_EVENT_ID:
                        event_id = value.decode()
                        arrived.setdefault(event_id, now)
                        missing.discard(event_id)


async def _transaction_markers(
    consumer: AIOKafkaConsumer, partitions: list[TopicPartition], records: int
) -> int:
    """Transaction markers on the run's topic: its log end offsets less its records. A relay transaction
    writes to one partition (a shard's rows go to one partition), so this counts transactions."""
    ends: dict[TopicPartition, int] = await consumer.end_offsets(partitions)
    return sum(ends.values()) - records


async def _warm_up(schema: BenchSchema, consumer: AIOKafkaConsumer, topic: str) -> int:
    """One event per shard, relayed and read before the clock starts: the figures are of a running relay,
    not of its producers' start (`init_transactions`, 200-400 ms per shard, measured in bench.single_event).
    `topic`: the outbox rows' topic (the relay adds the run's prefix)."""
    firsts: dict[int, OutboxMessage] = {}
    for message in build_messages(WARM_UP_CANDIDATES, topic, seed=WARM_UP_SEED).outbox:
        firsts.setdefault(partition_for_key(message.key, OUTBOX_SHARDS), message)
    if len(firsts) < OUTBOX_SHARDS:
        raise RuntimeError("the warm-up messages do not cover every shard")
    warm_ups = sorted(firsts.values(), key=lambda m: m.key)
    async with schema.pool.acquire() as conn, conn.transaction():
        await Outbox(schema.name).enqueue_many(conn, warm_ups)
    await asyncio.wait_for(
        _consume(consumer, {str(m.event_id) for m in warm_ups}, {}), WARM_UP_TIMEOUT_SECONDS
    )
    return len(warm_ups)  # one transaction each: their keys are in different shards


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
                warm_ups = await _warm_up(schema, consumer, messages[0].topic)
                wanted = {str(m.event_id) for m in messages}
                consuming = asyncio.create_task(_consume(consumer, wanted, arrived))
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
            markers = await _transaction_markers(consumer, partitions, len(messages) + warm_ups)
        finally:
            await consumer.stop()
        written = json.loads(result_file.read_text())
    committed: dict[str, float] = written["committed"]
    achieved = per_second(len(committed), written["seconds"])
    latencies = [arrived[e] - committed[e] for e in committed if e in arrived]
    return PacedRun(
        rate,
        achieved,
        len(messages),
        len(arrived),
        Latency.of_seconds(latencies),
        transactions=markers - warm_ups,
        seconds=written["seconds"],
    )
