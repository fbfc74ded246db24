"""`python -m bench.single_event`: where one event's milliseconds go, from its enqueue COMMIT to a
`read_committed` consumer, on the shipped relay (issue 25, item 1).

One event at a time (`--events`, `--gap-seconds` apart, so each finds the relay idle), through an
in-process `OutboxRelay` with the shipped configuration and confluent-kafka publishers, after a warm-up
that has every shard publish once (the first event of a shard waits for its producer to start). Each event's
moments, on one monotonic clock:

- ``commit``: the writer's COMMIT returned;
- ``notified``: a LISTEN connection of its own got the outbox's NOTIFY (the relay gets the same one);
- ``produced``: the relay handed the event to its Kafka producer (after waking and reading its window);
- ``committed``: the relay's Kafka transaction commit returned;
- ``received``: a `read_committed` consumer (fetch wait 5 ms) had the record.

Each step's p50/p95/p99 is printed, and the whole. The consumer may receive a record before the relay's
commit call has returned (the broker writes the markers first): that step is then negative and its share
is counted in the commit. Exits non-zero when an event is missing (`bench_runner.BenchCounts`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import asyncpg
from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.infra import BENCH_TOPIC_PARTITIONS, Stack, bench_schema, bench_topics, ensure_stack
from bench.stats import Latency
from yovision_platform.messaging import (
    OUTBOX_SHARDS,
    Header,
    Outbox,
    OutboxMessage,
    OutboxRelay,
    TransactionalPublisher,
    confluent_publisher_factory,
    notify_channel,
    seek_to_start,
)
from yovision_platform.tools.bench_runner import BenchCounts, run_cleanly

STEPS = ("notified", "produced", "committed", "received")
DEFAULT_EVENTS = 200
DEFAULT_GAP_SECONDS = 0.05
ARRIVAL_TIMEOUT_SECONDS = 10.0
KEYS = 60  # every shard has some
JSON_PREFIX = "BENCH_JSON "
# Issue 25: one event, enqueue COMMIT -> read by a read_committed consumer, on an idle 2-core machine.
GOAL_P50_MS = 15.0
GOAL_P99_MS = 50.0


class TimedPublisher:
    """A publisher that notes when each event was handed over and when its transaction's commit returned."""

    def __init__(
        self, inner: TransactionalPublisher, produced: dict[bytes, float], committed: dict[bytes, float]
    ):
        self._inner = inner
        self._produced = produced
        self._committed = committed
        self._batch: list[bytes] = []

    async def start(self) -> None:
        await self._inner.start()

    def begin(self) -> None:
        self._batch = []
        self._inner.begin()

    def send(self, topic: str, value: bytes, key: bytes, headers: Sequence[Header]) -> None:
        self._produced[value] = time.monotonic()
        self._batch.append(value)
        self._inner.send(topic, value, key, headers)

    async def commit(self) -> None:
        await self._inner.commit()
        now = time.monotonic()
        for value in self._batch:
            self._committed[value] = now

    async def abort(self) -> None:
        await self._inner.abort()

    async def close(self) -> None:
        await self._inner.close()


async def run(events: int, gap_seconds: float) -> tuple[dict[str, object], BenchCounts]:
    stack: Stack = ensure_stack()
    moments: dict[str, dict[bytes, float]] = {name: {} for name in ("commit", *STEPS)}
    async with bench_topics(stack) as topics, bench_schema(stack, purpose="single-event") as schema:
        topic = await topics.for_run("single")
        consumer = AIOKafkaConsumer(
            bootstrap_servers=stack.kafka_bootstrap,
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            fetch_max_wait_ms=5,
        )
        await consumer.start()
        partitions = [TopicPartition(topic, p) for p in range(BENCH_TOPIC_PARTITIONS)]
        consumer.assign(partitions)
        await seek_to_start(consumer, partitions)

        async def consume(arrived: asyncio.Event) -> None:
            while True:
                batch = await consumer.getmany(timeout_ms=100)
                now = time.monotonic()
                for records in batch.values():
                    for record in records:
                        moments["received"].setdefault(record.value, now)
                        arrived.set()

        pending: list[bytes] = [b""]  # the event in flight (one at a time)
        arrived = asyncio.Event()

        def notified(*_: object) -> None:
            moments["notified"].setdefault(pending[0], time.monotonic())

        listener = await asyncpg.connect(schema.dsn)
        await listener.add_listener(notify_channel(schema.name), notified)
        with ThreadPoolExecutor(max_workers=8) as executor:
            inner = confluent_publisher_factory(
                stack.kafka_bootstrap, client_id="bench-single", executor=executor
            )

            def factory(transactional_id: str) -> TransactionalPublisher:
                return TimedPublisher(inner(transactional_id), moments["produced"], moments["committed"])

            relay = OutboxRelay(schema.pool, schema.name, factory, owner="bench-single")
            stop = asyncio.Event()
            relay_task = asyncio.create_task(relay.run(stop))
            consumer_task = asyncio.create_task(consume(arrived))
            outbox = Outbox(schema.name)
            try:
                deadline = time.monotonic() + ARRIVAL_TIMEOUT_SECONDS
                while len(relay.held_shards()) < OUTBOX_SHARDS and time.monotonic() < deadline:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)  # the relay takes its shards before the first event
                # Warm-up, not measured: the first event of each shard waits for that shard's producer to
                # start (init_transactions: 200-400 ms measured), a relay start's cost, not an event's.
                warm_up = [
                    OutboxMessage(
                        uuid.uuid4(), "SmokeTestEvent", topic, f"key-{k}".encode(), f"warm-{k}".encode()
                    )
                    for k in range(KEYS)
                ]
                async with schema.pool.acquire() as conn, conn.transaction():
                    await outbox.enqueue_many(conn, warm_up)
                deadline = time.monotonic() + ARRIVAL_TIMEOUT_SECONDS
                while any(m.value not in moments["received"] for m in warm_up):
                    if time.monotonic() > deadline:
                        raise RuntimeError("the warm-up events did not arrive")
                    await asyncio.sleep(0.05)
                for n in range(events):
                    value = f"single-{n}-{uuid.uuid4().hex[:8]}".encode()
                    pending[0] = value
                    arrived.clear()
                    message = OutboxMessage(
                        uuid.uuid4(), "SmokeTestEvent", topic, f"key-{n % KEYS}".encode(), value
                    )
                    async with schema.pool.acquire() as conn:
                        async with conn.transaction():
                            await outbox.enqueue(conn, message)
                        moments["commit"][value] = time.monotonic()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(ARRIVAL_TIMEOUT_SECONDS):
                            await arrived.wait()
                    await asyncio.sleep(gap_seconds)  # the relay idle again, as for a lone event
            finally:
                stop.set()
                await relay_task
                consumer_task.cancel()
                await asyncio.gather(consumer_task, return_exceptions=True)
                await consumer.stop()
                await listener.close()
    counts = BenchCounts()
    sent = list(moments["commit"])  # the measured events (the warm-up has no commit moment)
    for step in STEPS:
        counts.expect(f"events with a '{step}' moment", sum(v in moments[step] for v in sent), events)
    complete = [v for v in sent if all(v in moments[s] for s in STEPS)]
    steps: dict[str, Latency] = {}
    previous = "commit"
    for step in STEPS:
        steps[f"{previous} -> {step}"] = Latency.of_seconds(
            [moments[step][v] - moments[previous][v] for v in complete]
        )
        previous = step
    steps["commit -> received (whole)"] = Latency.of_seconds(
        [moments["received"][v] - moments["commit"][v] for v in complete]
    )
    slowest = max(complete, key=lambda v: moments["received"][v] - moments["commit"][v], default=None)
    result: dict[str, object] = {
        "slowest_event": {
            "index": sent.index(slowest),
            "steps_ms": {
                step: round((moments[step][slowest] - moments["commit"][slowest]) * 1000, 2) for step in STEPS
            },
        }
        if slowest is not None
        else None,
        "events": events,
        "gap_seconds": gap_seconds,
        "steps": {name: lat.as_dict() for name, lat in steps.items()},
        "wrong_counts": counts.short,
    }
    return result, counts


def goal_line(result: dict[str, object]) -> str:
    steps = result["steps"]
    assert isinstance(steps, dict)
    whole = steps["commit -> received (whole)"]
    met = whole["p50_ms"] <= GOAL_P50_MS and whole["p99_ms"] <= GOAL_P99_MS
    return (
        f"goal: a lone event p50 <= {GOAL_P50_MS:.0f} ms, p99 <= {GOAL_P99_MS:.0f} ms -> p50 "
        f"{whole['p50_ms']:.1f} ms, p99 {whole['p99_ms']:.1f} ms: {'met' if met else 'NOT met'}"
    )


def table(result: dict[str, object]) -> str:
    steps = result["steps"]
    assert isinstance(steps, dict)
    lines = [
        f"one event at a time ({result['events']} events, {result['gap_seconds']} s apart), ms:",
        f"{'step':<30} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8}",
    ]
    for name, lat in steps.items():
        figures = " ".join(f"{lat[k]:>8.2f}" for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms"))
        lines.append(f"{name:<30} {figures}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.single_event", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=DEFAULT_EVENTS)
    parser.add_argument("--gap-seconds", type=float, default=DEFAULT_GAP_SECONDS)
    args = parser.parse_args()
    result, counts = run_cleanly(run(args.events, args.gap_seconds))
    print(table(result))
    print(goal_line(result))
    print(JSON_PREFIX + json.dumps({"bench": "single_event", **result}))
    counts.exit_if_short("bench.single_event")


if __name__ == "__main__":
    main()
