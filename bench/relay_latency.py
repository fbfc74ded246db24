"""End-to-end publish latency under a paced load: enqueue commit to "marked published" by the relay.

Writers enqueue with `Outbox.enqueue` at a fixed rate (small transactions) while `OutboxRelay.run()` runs
with its production loop (poll interval included). Latency per row is `published_at - created_at`, both
stamped by the database clock: `created_at` is the enqueue transaction's start, `published_at` the start
of the relay's settle transaction, which begins only after Kafka acknowledged the row. So it bounds the
enqueue-to-Kafka-ack time from above by one settle statement.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer

from bench.infra import BenchSchema
from bench.produce import relay_linger, started_producer
from bench.stats import Latency, per_second
from yovision_platform.outbox import Outbox, OutboxMessage
from yovision_platform.relay import OutboxRelay, RelayConfig

__all__ = ["PacedRun", "run_paced"]

PACED_TRANSACTION_ROWS = 10
PACED_DRAIN_TIMEOUT_SECONDS = 30.0
PACED_CHECK_INTERVAL_SECONDS = 0.05


@dataclass(frozen=True)
class PacedRun:
    target_rate: float
    achieved_rate: float
    rows: int
    unpublished: int
    batch_size: int
    poll_interval_seconds: float
    latency: Latency

    def as_dict(self) -> dict[str, object]:
        return {
            "target_rate_per_s": round(self.target_rate),
            "achieved_rate_per_s": round(self.achieved_rate),
            "rows": self.rows,
            "unpublished": self.unpublished,
            "batch_size": self.batch_size,
            "poll_interval_s": self.poll_interval_seconds,
            "latency": self.latency.as_dict(),
        }


async def _enqueue_paced(schema: BenchSchema, messages: Sequence[OutboxMessage], rate: float) -> float:
    """Enqueue at `rate` rows/s in transactions of PACED_TRANSACTION_ROWS; returns the achieved rate."""
    outbox = Outbox(schema.name)
    started = time.perf_counter()
    async with schema.pool.acquire() as conn:
        for offset in range(0, len(messages), PACED_TRANSACTION_ROWS):
            due = started + offset / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            async with conn.transaction():
                for message in messages[offset : offset + PACED_TRANSACTION_ROWS]:
                    await outbox.enqueue(conn, message)
    return per_second(len(messages), time.perf_counter() - started)


async def _unpublished_since(schema: BenchSchema, first_id: int) -> int:
    count: int = await schema.pool.fetchval(
        f"SELECT count(*) FROM {schema.name.quoted}.outbox WHERE id >= $1 AND published_at IS NULL", first_id
    )
    return count


async def run_paced(
    schema: BenchSchema,
    bootstrap: str,
    topic: str,
    messages: Sequence[OutboxMessage],
    *,
    rate: float,
    poll_interval_seconds: float | None = None,
) -> PacedRun:
    config = (
        RelayConfig()
        if poll_interval_seconds is None
        else RelayConfig(poll_interval_seconds=poll_interval_seconds)
    )
    first_id: int = await schema.pool.fetchval(
        f"SELECT coalesce(max(id), 0) + 1 FROM {schema.name.quoted}.outbox"
    )

    async def producer_factory() -> AIOKafkaProducer:
        return await started_producer(
            bootstrap, topic, client_id="bench-relay-paced", linger_ms=relay_linger(None)
        )

    relay = OutboxRelay(schema.pool, schema.name, producer_factory, owner="bench-relay-paced", config=config)
    stop = asyncio.Event()
    relay_task = asyncio.create_task(relay.run(stop))
    try:
        achieved = await _enqueue_paced(schema, messages, rate)
        deadline = time.monotonic() + PACED_DRAIN_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if not await _unpublished_since(schema, first_id):
                break
            await asyncio.sleep(PACED_CHECK_INTERVAL_SECONDS)
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await relay_task
    seconds = await schema.pool.fetch(
        f"""SELECT extract(epoch FROM published_at - created_at)::float8 AS latency
              FROM {schema.name.quoted}.outbox WHERE id >= $1 AND published_at IS NOT NULL""",
        first_id,
    )
    return PacedRun(
        target_rate=rate,
        achieved_rate=achieved,
        rows=len(messages),
        unpublished=await _unpublished_since(schema, first_id),
        batch_size=config.batch_size,
        poll_interval_seconds=config.poll_interval_seconds,
        latency=Latency.of_seconds([r["latency"] for r in seconds]),
    )
