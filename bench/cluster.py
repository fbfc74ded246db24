"""The relay on a three-broker Kafka cluster (issue 26, item 4): `python -m bench --cluster`.

Starts its **own** three-node KRaft cluster (`yovision_platform.tools.kafka_cluster`: the stack's jars and
broker template, combined controller + broker nodes) on free loopback ports in a temporary folder, and
removes it at the end, also on failure or Ctrl-C; the stack's broker is never touched. PostgreSQL is the
stack's (a `bench_<hex>` schema per part, dropped). Topics have 6 partitions, replication 3 and
min.insync.replicas 2 (`bench.infra.bench_topics` reads the broker count).

1. **Throughput**: one relay process draining 50,000 outbox rows (`bench.relay_throughput.run_relays`, the
   main benchmark's run) against Kafka's ProducerPerformance (idempotent, acks=all; `bench.producer_perf`)
   on the same cluster in the same run: as the main benchmark runs it, before and after the drain, and with
   batch.size 1 MiB (librdkafka's default, so the relay's). Goal: the relay >= 0.3 of the fastest.
2. **Leader kills**: a steady writer (Avro `SmokeTestEvent`s through `Outbox.enqueue_many`, 10 per
   transaction, 200/s); the shipped relay (`OutboxRelay`, shipped configuration, in this process)
   publishes them; the platform's `IdempotentConsumer` (a consumer group, positions in PostgreSQL) applies
   them. N times, the broker leading partition `i mod 6` is SIGKILLed. The window runs from the SIGKILL to
   the commit of the first Kafka transaction of that partition's relay shard begun after it (with 6
   partitions a shard's rows are one partition's). The broker is then started again, and the next kill
   waits until every partition of the topic, `__transaction_state` and `__consumer_offsets` has its 3
   replicas in sync. Goal: p99 <= 10 s (the brokers' session timeout is 9 s).
3. **Rolling restart**: the same pipeline, caught up first; each broker in turn is stopped (SIGTERM: a
   controlled shutdown) and started, back in sync before the next. Consumer lag = the topic's last stable
   offsets (a client of its own) less the group's stored positions, sampled every 100 ms: its peak. Per
   phase (steady flow, kills, rolling restart) also each row's wait from its outbox COMMIT until its Kafka
   transaction committed (the relay's part) and until the consumer applied it.

Checks (a wrong count exits 1): every row written is on the topic at least once (a batch whose commit
answer was lost may be there twice: counted, allowed), nothing else is there, each key in commit order; the
consumer group applied every row; the relay drain delivered every row; ProducerPerformance sent every record.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import dataclasses
import datetime
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from aiokafka import ConsumerRecord, TopicPartition
from prometheus_client import CollectorRegistry

from bench.cli import JSON_PREFIX
from bench.infra import (
    BENCH_TOPIC_PARTITIONS,
    REPO_ROOT,
    BenchSchema,
    Stack,
    bench_schema,
    bench_topics,
    ensure_stack,
)
from bench.messages import BENCH_EVENT_TYPE, BENCH_NOTE_CHARS, BENCH_SOURCE_SYSTEM, build_messages
from bench.produce import count_records
from bench.producer_perf import PerfRun, producer_performance
from bench.relay_throughput import RelayRun, run_relays
from bench.report import RELAY_GOAL_PERF_RATIO
from bench.stats import Latency
from bench.table import Cell, render_table
from yovision_platform.messaging import (
    HEADER_EVENT_ID,
    OUTBOX_SHARDS,
    AvroSerde,
    Header,
    IdempotentConsumer,
    InboundEvent,
    Outbox,
    OutboxMessage,
    OutboxRelay,
    OutboxRelayConfig,
    OutboxRelayMetrics,
    PublisherFactory,
    SchemaRegistry,
    TransactionalPublisher,
    build_event,
    catalog_for,
    confluent_publisher_factory,
    executor_for,
    outbox_shard,
    plain_consumer,
    read_leaders,
    stored_positions,
)
from yovision_platform.storage import DbConnection, Identifier, create_pool
from yovision_platform.tools.bench_runner import BenchCounts, run_cleanly
from yovision_platform.tools.kafka_cluster import ClusterLayout, KafkaCluster, Node
from yovision_platform.tools.localhost import free_port

__all__ = ["main"]

NODES = 3
DEFAULT_MESSAGES = 50_000
DEFAULT_PERF_RECORDS = 150_000  # per run; three runs
PERF_LARGE_BATCH_BYTES = 1024 * 1024
DEFAULT_KILLS = 5
DEFAULT_WRITE_RATE = 200.0  # rows/s: well within what writer, relay and consumer do on 2 shared cores,
# so that the failovers, not the machine, make the lag
QUICK_MESSAGES = 5_000
QUICK_PERF_RECORDS = 50_000
QUICK_KILLS = 2
ROWS_PER_TRANSACTION = 10
WRITER_KEYS = 120  # every shard (partition) gets rows all the time
GOAL_KILL_P99_SECONDS = 10.0
STEADY_SECONDS = 3.0  # steady flow measured before the first kill
SETTLE_SECONDS = 1.0  # steady flow between two failovers
CAUGHT_UP_SECONDS = 1.0  # caught up: as many rows applied as were committed this long ago
CATCH_UP_TIMEOUT_SECONDS = 90.0
WINDOW_TIMEOUT_SECONDS = 60.0
IN_SYNC_TIMEOUT_SECONDS = 120.0
POLL_SECONDS = 0.02
IN_SYNC_POLL_SECONDS = 0.25
LEADER_POLL_SECONDS = 0.1
UNAPPLIED_SHOWN = 10
LAG_SAMPLE_SECONDS = 0.1
LAG_SAMPLE_TIMEOUT_SECONDS = 2.0
LAG_CLIENT_REQUEST_TIMEOUT_MS = 5000
PIPELINE_POOL_SIZE = 16  # the relay's and the consumer's connections
INTERNAL_TOPICS = ("__transaction_state", "__consumer_offsets")
# librdkafka's and aiokafka's reconnect reports while nodes die, and the relay's back-off warnings (its
# failures are counted instead); errors of the relay and the consumer still print
QUIET_LOGGERS = {
    "aiokafka": logging.CRITICAL,
    "yovision_platform.librdkafka": logging.CRITICAL,
    "yovision_platform": logging.ERROR,
}


def _progress(text: str) -> None:
    print(f"[bench-cluster] {text}", file=sys.stderr, flush=True)


def _emit(text: str) -> None:
    print(text, flush=True)
    print(flush=True)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench --cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--messages", type=int, default=DEFAULT_MESSAGES, help="rows of the relay drain")
    parser.add_argument("--perf-records", type=int, default=DEFAULT_PERF_RECORDS, help="ProducerPerformance")
    parser.add_argument("--batch-size", type=int, default=OutboxRelayConfig().batch_size)
    parser.add_argument("--kills", type=int, default=DEFAULT_KILLS, help="leader SIGKILL/restart cycles")
    parser.add_argument("--rate", type=float, default=DEFAULT_WRITE_RATE, help="steady writer, rows/s")
    parser.add_argument("--quick", action="store_true", help="small sizes, 2 kills: a smoke run")
    args = parser.parse_args(argv)
    if args.kills < 1 or args.rate <= 0:
        parser.error("--kills must be at least 1 and --rate positive")
    if args.quick:
        args.messages = min(args.messages, QUICK_MESSAGES)
        args.perf_records = min(args.perf_records, QUICK_PERF_RECORDS)
        args.kills = min(args.kills, QUICK_KILLS)
    return args


# -- the private cluster ---------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def private_cluster() -> AsyncIterator[KafkaCluster]:
    """Three nodes on free loopback ports in a temporary folder; SIGKILLed and deleted on exit."""
    directory = Path(tempfile.mkdtemp(prefix="bench-kafka-cluster-"))
    layout = ClusterLayout.on_ports(directory, [(free_port(), free_port()) for _ in range(NODES)])
    cluster = KafkaCluster(
        layout,
        kafka_home=REPO_ROOT / ".local" / "kafka",
        template=REPO_ROOT / "infra" / "kafka" / "server.properties",
    )
    try:
        cluster.up()  # blocking: a thread still starting nodes after a Ctrl-C would outlive the cleanup
        await cluster.wait_ready()
        yield cluster
    finally:
        cluster.down(graceful=False)  # blocking on purpose: it must run even when the task is cancelled
        shutil.rmtree(directory, ignore_errors=True)


async def wait_in_sync(cluster: KafkaCluster, topics: Sequence[str], *, restarted: Node) -> None:
    """Until the cluster is back in sync on `topics`, asked of a node that was not restarted (a starting
    node accepts connections before it answers)."""
    via = next(node for node in cluster.layout.nodes if node != restarted)
    await wait_for(
        "the cluster back in sync",
        lambda: cluster.in_sync(topics, via=via),
        IN_SYNC_TIMEOUT_SECONDS,
        interval=IN_SYNC_POLL_SECONDS,
    )


async def wait_for(
    what: str,
    ready: Callable[[], Awaitable[bool]],
    timeout_seconds: float,
    *,
    interval: float = POLL_SECONDS,
) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not await ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout_seconds:.0f} s")
        await asyncio.sleep(interval)


# -- part 1: relay vs ProducerPerformance ----------------------------------------------------------------


@dataclass(frozen=True)
class Throughput:
    perf: list[PerfRun]  # the fastest is the limit
    relay: RelayRun

    @property
    def limit(self) -> float:
        return max(p.events_per_second for p in self.perf)

    @property
    def ratio(self) -> float:
        return self.relay.events_per_second / self.limit if self.limit > 0 else 0.0


async def throughput(stack: Stack, args: argparse.Namespace) -> Throughput:
    """ProducerPerformance as the main benchmark runs it; the relay drain; the same again (the brokers of a
    new cluster are still warming up during the first run); then with batch.size 1 MiB, librdkafka's
    default and so the relay's: on three replicas the Java client's 16 KiB batches are its own limit."""
    async with bench_topics(stack) as topics:
        messages = build_messages(args.messages, topics.base)

        async def perf(when: str, batch_bytes: int | None = None) -> PerfRun:
            size = batch_bytes or "default"
            _progress(f"ProducerPerformance ({when}), {args.perf_records:,} records, batch.size {size}")
            run = await producer_performance(
                stack.kafka_bootstrap,
                await topics.create(f"perf-{when}-{batch_bytes or 'default'}.{topics.base}"),
                records=args.perf_records,
                record_size=round(messages.mean_value_bytes),
                transactional=False,
                batch_bytes=batch_bytes,
            )
            return dataclasses.replace(run, label=f"{run.label}, {when} the relay")

        runs = [await perf("before")]
        async with bench_schema(stack, purpose="cluster-relay") as schema:
            _progress(f"relay drain: 1 relay process, {args.messages:,} rows, batch {args.batch_size}")
            relay = await run_relays(
                stack,
                schema,
                topics,
                messages.outbox,
                relays=1,
                client="confluent",
                batch_size=args.batch_size,
            )
        runs += [await perf("after"), await perf("after", PERF_LARGE_BATCH_BYTES)]
    return Throughput(runs, relay)


def throughput_text(run: Throughput, counts: BenchCounts) -> str:
    relay_ok = counts.expect(
        f"cluster {run.relay.label}: records on the topic", run.relay.delivered, run.relay.rows
    )

    def ratio(rate: float) -> str:
        return f"{rate / run.limit:.3f}" if run.limit > 0 else "-"

    rows: list[list[Cell]] = [
        [p.label, p.records, p.records, "-", p.events_per_second, ratio(p.events_per_second), "-"]
        for p in run.perf
    ]
    rows.append(
        [
            run.relay.label,
            run.relay.rows,
            run.relay.delivered if relay_ok else BenchCounts.mark(False, ""),
            run.relay.wall_seconds,
            run.relay.events_per_second,
            ratio(run.relay.events_per_second),
            run.relay.relay_cpu_seconds,
        ]
    )
    table = render_table(
        "(c) Outbox relay vs Kafka's ProducerPerformance on a three-broker cluster (replication 3, "
        "min.insync.replicas 2, acks=all, idempotent; relay: a Kafka transaction per batch; ratios against "
        "the fastest ProducerPerformance run)",
        ["variant", "events", "delivered", "wall s", "events/s", "vs PerfTest", "CPU s"],
        rows,
    )
    met = relay_ok and run.ratio >= RELAY_GOAL_PERF_RATIO
    goal = (
        f"goal: cluster, 1 relay >= {RELAY_GOAL_PERF_RATIO} of ProducerPerformance (acks=all, RF 3, "
        f"min ISR 2) -> {run.relay.events_per_second:,.0f}/s of {run.limit:,.0f}/s = "
        f"{run.ratio:.3f}: {_verdict(met)}"
    )
    return f"{table}\n{goal}"


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


# -- the failover pipeline: writer -> outbox -> relay -> cluster -> consumer group ------------------------


@dataclass(frozen=True)
class Commit:
    """One Kafka transaction of the relay: its shard, when it began (first send), when its commit returned,
    and the event ids it carried."""

    shard: int
    began: float
    committed: float
    event_ids: tuple[str, ...]


class TimedPublisher:
    """The relay's publisher of one shard, delegating every call and noting each committed transaction."""

    def __init__(self, inner: TransactionalPublisher, shard: int, commits: list[Commit]) -> None:
        self._inner, self._shard, self._commits = inner, shard, commits
        self._began = 0.0
        self._event_ids: list[str] = []

    async def start(self) -> None:
        await self._inner.start()

    def begin(self) -> None:
        self._began = time.monotonic()
        self._event_ids = []
        self._inner.begin()

    def send(self, topic: str, value: bytes, key: bytes, headers: Sequence[Header]) -> None:
        self._inner.send(topic, value, key, headers)
        event_id = next((v for k, v in headers if k == HEADER_EVENT_ID), "")
        self._event_ids.append(event_id.decode() if isinstance(event_id, bytes) else event_id)

    async def commit(self) -> None:
        await self._inner.commit()
        self._commits.append(Commit(self._shard, self._began, time.monotonic(), tuple(self._event_ids)))

    async def abort(self) -> None:
        await self._inner.abort()

    async def close(self) -> None:
        await self._inner.close()


def timed(factory: PublisherFactory, commits: list[Commit]) -> PublisherFactory:
    def make(transactional_id: str) -> TransactionalPublisher:
        shard = int(transactional_id.rsplit(".", 1)[1])  # transactional_id(): "...<table>.<shard>"
        return TimedPublisher(factory(transactional_id), shard, commits)

    return make


class SteadyWriter:
    """Transactions of ROWS_PER_TRANSACTION events at `rate` rows/s, keys in turn. Remembers each row's
    number by event id, its COMMIT time, and each key's rows in commit order."""

    def __init__(self, pool: asyncpg.Pool, schema: Identifier, topic: str, rate: float) -> None:
        self._pool, self._outbox, self._topic = pool, Outbox(schema), topic
        self._interval = ROWS_PER_TRANSACTION / rate
        self.serde = AvroSerde(SchemaRegistry.load())
        self._catalog = catalog_for(self.serde)
        self.row_of: dict[str, int] = {}  # event id -> row number
        self.committed_at: list[float] = []  # by row number (non-decreasing)
        self.written: dict[bytes, list[int]] = defaultdict(list)
        self.stop = asyncio.Event()

    @property
    def count(self) -> int:
        return len(self.committed_at)

    def committed_before(self, moment: float) -> int:
        return bisect.bisect_right(self.committed_at, moment)

    def _message(self, row: int) -> OutboxMessage:
        run_id = f"bench-cluster-{row % WRITER_KEYS:03d}"
        payload = {"run_id": run_id, "produced_by": "bench-cluster", "note": "n" * BENCH_NOTE_CHARS}
        event = build_event(
            self.serde, BENCH_EVENT_TYPE, run_id, payload, BENCH_SOURCE_SYSTEM, catalog=self._catalog
        )
        return OutboxMessage.from_event(event, topic=self._topic)

    async def run(self) -> None:
        next_at = time.monotonic()
        while not self.stop.is_set():
            first = self.count
            batch = [self._message(row) for row in range(first, first + ROWS_PER_TRANSACTION)]
            for row, message in enumerate(batch, start=first):  # before the COMMIT: the consumer may apply
                self.row_of[str(message.event_id)] = row  # a row before this task runs again after it
                self.written[message.key].append(row)
            async with self._pool.acquire() as conn, conn.transaction():
                await self._outbox.enqueue_many(conn, batch)
            now = time.monotonic()
            self.committed_at.extend([now] * len(batch))
            next_at = max(next_at + self._interval, now - 1.0)  # behind by over a second: no burst
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))


@dataclass(frozen=True)
class Phase:
    name: str
    start: float
    end: float

    def __contains__(self, moment: float) -> bool:
        return self.start <= moment <= self.end


@dataclass(frozen=True)
class KillRun:
    partition: int
    node: int
    window_seconds: float
    leader_moved_seconds: float  # from the kill until the cluster's metadata named another leader
    failed_batches: dict[str, int]  # the relay's aborted batches by reason, from the kill to back in sync
    in_sync_seconds: float  # from the restart until every replica was back in sync


@dataclass(frozen=True)
class RestartRun:
    node: int
    stop_seconds: float  # SIGTERM until the process was gone (controlled shutdown)
    in_sync_seconds: float  # from the start until every replica was back in sync


class Pipeline:
    """Writer, relay and consumer group on one topic, and what each of them saw."""

    def __init__(self, schema: BenchSchema, bootstrap: str, topic: str, group: str, rate: float) -> None:
        self.schema, self.bootstrap, self.topic, self.group = schema, bootstrap, topic, group
        self.writer = SteadyWriter(schema.pool, schema.name, topic, rate)
        self.commits: list[Commit] = []
        self.registry = CollectorRegistry()
        self.applied: dict[int, float] = {}  # row -> when the consumer group first applied it
        self.samples: list[tuple[float, int]] = []  # (when, lag in records)
        self.missed_samples = 0
        self.unknown_applied = 0  # events the consumer applied that no row of this run wrote

    async def handle(self, _conn: DbConnection, event: InboundEvent) -> None:
        """The consumer's handler: note each row's first apply (inside the consumer's transaction)."""
        row = self.writer.row_of.get(str(event.event_id))
        if row is None:
            self.unknown_applied += 1
        elif row not in self.applied:
            self.applied[row] = time.monotonic()

    async def sample_lag(self, stop: asyncio.Event) -> None:
        """Lag = the topic's last stable offsets (a client of its own) less the group's stored positions."""
        reader = plain_consumer(
            self.bootstrap,
            client_id="bench-cluster-lag",
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            request_timeout_ms=LAG_CLIENT_REQUEST_TIMEOUT_MS,
        )
        await reader.start()
        partitions = [TopicPartition(self.topic, p) for p in range(BENCH_TOPIC_PARTITIONS)]
        try:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    async with asyncio.timeout(LAG_SAMPLE_TIMEOUT_SECONDS):
                        ends = await reader.end_offsets(partitions)
                    async with self.schema.pool.acquire() as conn:
                        positions = await stored_positions(conn, self.schema.name, self.group)
                    lag = sum(max(0, ends[tp] - positions.get(tp, 0)) for tp in partitions)
                    self.samples.append((time.monotonic(), lag))
                except Exception:  # no answer within the bound (a partition between leaders): no sample
                    self.missed_samples += 1
                await asyncio.sleep(max(0.0, LAG_SAMPLE_SECONDS - (time.monotonic() - started)))
        finally:
            await reader.stop()

    def failed_batches(self) -> dict[str, float]:
        """The relay's aborted batches by reason (outbox_relay_failed_total)."""
        return {
            sample.labels["reason"]: sample.value
            for metric in self.registry.collect()
            if metric.name == "outbox_relay_failed"
            for sample in metric.samples
            if sample.name.endswith("_total") and sample.value
        }

    def failed_since(self, before: Mapping[str, float]) -> dict[str, int]:
        return {
            reason: round(count - before.get(reason, 0.0))
            for reason, count in self.failed_batches().items()
            if count > before.get(reason, 0.0)
        }

    async def drain_state(self, relay: OutboxRelay) -> str:
        """Where rows stopped: the outbox backlog, unapplied rows by shard, and each shard's cursor."""
        unapplied: dict[int, int] = defaultdict(int)
        for key, rows in self.writer.written.items():
            unapplied[outbox_shard(key)] += sum(1 for row in rows if row not in self.applied)
        now = time.monotonic()
        last = {c.shard: round(now - c.committed, 1) for c in self.commits}
        async with self.schema.pool.acquire() as conn:
            cursors = await conn.fetch(
                f"""SELECT shard, owner IS NOT NULL AS held, attempts, last_error_code,
                           round(extract(epoch FROM next_attempt_at - now())::numeric, 1) AS retry_in_s
                      FROM {self.schema.name.quoted}.outbox_cursors ORDER BY shard"""
            )
        return (
            f"backlog {await relay.backlog()}, unapplied rows by shard {dict(unapplied)}, seconds since each "
            f"shard's last commit {last}, cursors {[dict(c) for c in cursors]}, "
            f"failed batches {self.failed_batches()}"
        )

    def flowing(self) -> bool:
        """Every shard has published, and the consumer group has applied as many rows as were committed
        CAUGHT_UP_SECONDS ago or earlier (a count: a row it missed shows in the final counts)."""
        shards = {c.shard for c in self.commits} == set(range(OUTBOX_SHARDS))
        behind = self.writer.committed_before(time.monotonic() - CAUGHT_UP_SECONDS) - len(self.applied)
        return shards and bool(self.applied) and behind <= 0

    def first_commit(self, shard: int, began_after: float) -> Commit | None:
        return next((c for c in self.commits if c.shard == shard and c.began >= began_after), None)

    # -- figures by phase --

    def lag_peak(self, phase: Phase) -> tuple[int, float, int]:
        """The highest lag sampled in the phase, when (s into it), and the samples taken."""
        inside = [(lag, at - phase.start) for at, lag in self.samples if at in phase]
        peak, at = max(inside, default=(0, 0.0))
        return peak, at, len(inside)

    def publish_waits(self, phase: Phase) -> list[float]:
        """COMMIT -> the row's first Kafka transaction committed, for rows committed during the phase."""
        first: dict[int, float] = {}
        for commit in self.commits:
            for event_id in commit.event_ids:
                row = self.writer.row_of.get(event_id)
                if row is not None and row not in first:
                    first[row] = commit.committed
        return self._waits(first, phase)

    def apply_waits(self, phase: Phase) -> list[float]:
        """COMMIT -> the consumer group applied the row, for rows committed during the phase."""
        return self._waits(self.applied, phase)

    def _waits(self, reached: dict[int, float], phase: Phase) -> list[float]:
        committed = self.writer.committed_at
        rows = range(self.writer.committed_before(phase.start), self.writer.committed_before(phase.end))
        return [reached[row] - committed[row] for row in rows if row in reached]


async def wait_caught_up(pipeline: Pipeline, what: str) -> None:
    async def caught_up() -> bool:
        return pipeline.flowing()

    await wait_for(what, caught_up, CATCH_UP_TIMEOUT_SECONDS)


async def leader_kill(cluster: KafkaCluster, pipeline: Pipeline, partition: int) -> KillRun:
    victim: Node = cluster.layout.node(
        (await read_leaders(cluster.layout.bootstrap, pipeline.topic))[partition]
    )
    _progress(f"SIGKILL of node {victim.node_id}, leader of partition {partition}")
    failed_before = pipeline.failed_batches()
    killed_at = time.monotonic()
    await asyncio.to_thread(cluster.kill, victim)
    moved = asyncio.create_task(leader_moved(cluster.layout.bootstrap, pipeline.topic, partition, victim))

    async def resumed() -> bool:
        return pipeline.first_commit(partition, killed_at) is not None

    try:
        await wait_for(f"a commit on partition {partition} after the kill", resumed, WINDOW_TIMEOUT_SECONDS)
        moved_at = await asyncio.wait_for(moved, WINDOW_TIMEOUT_SECONDS)
    finally:
        moved.cancel()
    first = pipeline.first_commit(partition, killed_at)
    assert first is not None
    window = first.committed - killed_at
    restarted_at = time.monotonic()
    cluster.start(victim)
    await wait_in_sync(cluster, (pipeline.topic, *INTERNAL_TOPICS), restarted=victim)
    in_sync = time.monotonic() - restarted_at
    failed = pipeline.failed_since(failed_before)
    _progress(
        f"  leader moved after {moved_at - killed_at:.2f} s, published again after {window:.2f} s; "
        f"node back in sync {in_sync:.1f} s after its restart"
    )
    return KillRun(partition, victim.node_id, window, moved_at - killed_at, failed, in_sync)


async def leader_moved(bootstrap: str, topic: str, partition: int, victim: Node) -> float:
    """When (monotonic) the cluster's metadata first names a leader of `partition` other than `victim`."""
    while True:
        try:
            leader = (await read_leaders(bootstrap, topic)).get(partition)
        except Exception:  # a client of the dead node's: ask again
            leader = None
        if leader is not None and leader not in (-1, victim.node_id):
            return time.monotonic()
        await asyncio.sleep(LEADER_POLL_SECONDS)


async def rolling_restart(cluster: KafkaCluster, pipeline: Pipeline) -> list[RestartRun]:
    runs = []
    for node in cluster.layout.nodes:
        _progress(f"rolling restart: node {node.node_id}")
        started = time.monotonic()
        await asyncio.to_thread(cluster.stop, node)
        stopped = time.monotonic()
        cluster.start(node)
        await wait_in_sync(cluster, (pipeline.topic, *INTERNAL_TOPICS), restarted=node)
        runs.append(RestartRun(node.node_id, stopped - started, time.monotonic() - stopped))
    return runs


@dataclass
class Failover:
    kills: list[KillRun]
    restarts: list[RestartRun]
    phases: list[Phase]  # steady, leader kills, rolling restart
    rows: int = 0
    on_topic: int = 0  # records, duplicates included
    distinct: int = 0  # rows found at least once
    foreign: int = 0  # records no row of this run wrote
    out_of_order: int = 0  # keys whose first appearances differ from their commit order
    applied: int = 0  # rows the consumer group applied
    applied_foreign: int = 0  # events it applied that no row wrote
    failed_batches: dict[str, float] = dataclasses.field(default_factory=dict)
    rolling_failed: dict[str, int] = dataclasses.field(default_factory=dict)  # during the rolling restart

    @property
    def rolling(self) -> Phase:
        return self.phases[-1]

    @property
    def duplicates(self) -> int:
        return self.on_topic - self.foreign - self.distinct


async def failover(
    stack: Stack, cluster: KafkaCluster, args: argparse.Namespace
) -> tuple[Failover, Pipeline]:
    """The writer, the shipped relay and the consumer group run throughout; steady flow, the leader kills,
    then the rolling restart; then the outbox drains and the topic is read back."""
    if BENCH_TOPIC_PARTITIONS != OUTBOX_SHARDS:
        raise RuntimeError("the kill window needs one partition per relay shard")
    bootstrap = cluster.layout.bootstrap
    async with bench_topics(stack) as topics, bench_schema(stack, purpose="cluster-failover") as schema:
        topic = await topics.create(f"failover.{topics.base}")
        pipeline = Pipeline(schema, bootstrap, topic, f"bench-cluster-{topics.base}", args.rate)
        pool = await create_pool(schema.dsn, application_name="bench-cluster", max_size=PIPELINE_POOL_SIZE)
        consumer = IdempotentConsumer(
            pool,
            schema.name,
            consumer_group=pipeline.group,
            decode=pipeline.writer.serde.decode,
            handler=pipeline.handle,
        )
        config = OutboxRelayConfig()  # as shipped
        stop = asyncio.Event()
        try:
            with executor_for(config) as executor:
                factory = confluent_publisher_factory(
                    bootstrap, client_id="bench-cluster-relay", executor=executor
                )
                relay = OutboxRelay(
                    pool,
                    schema.name,
                    timed(factory, pipeline.commits),
                    owner="bench-cluster-relay",
                    config=config,
                    metrics=OutboxRelayMetrics(pipeline.registry),
                )
                tasks = [
                    asyncio.create_task(relay.run(stop)),
                    asyncio.create_task(
                        consumer.consume_topics(bootstrap, [topic], stop, client_id=pipeline.group)
                    ),
                    asyncio.create_task(pipeline.sample_lag(stop)),
                    asyncio.create_task(pipeline.writer.run()),
                ]
                try:
                    result = await _failovers(cluster, pipeline, args.kills)
                    pipeline.writer.stop.set()
                    await tasks[-1]

                    async def drained() -> bool:
                        return await relay.backlog() == 0 and len(pipeline.applied) >= pipeline.writer.count

                    _progress(f"draining: {pipeline.writer.count:,} rows written")
                    try:
                        await wait_for("outbox drained, every row applied", drained, CATCH_UP_TIMEOUT_SECONDS)
                    except RuntimeError as late:  # the counts below fail the run; say where rows stopped
                        _progress(f"{late}: {await pipeline.drain_state(relay)}")
                finally:
                    pipeline.writer.stop.set()
                    stop.set()
                    await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            await pool.close()
        result.failed_batches = pipeline.failed_batches()
        result.applied = len(pipeline.applied)
        result.applied_foreign = pipeline.unknown_applied
        await _check_topic(pipeline, result)
    return result, pipeline


async def _failovers(cluster: KafkaCluster, pipeline: Pipeline, kills: int) -> Failover:
    await wait_caught_up(pipeline, "every relay shard publishing and the consumer group caught up")
    start = time.monotonic()
    await asyncio.sleep(STEADY_SECONDS)
    steady = Phase("steady", start, time.monotonic())
    await asyncio.sleep(CAUGHT_UP_SECONDS)  # the steady phase's rows go through before the first kill
    await wait_caught_up(pipeline, "the consumer group caught up after the steady flow")
    runs = []
    first_kill = time.monotonic()
    for i in range(kills):
        runs.append(await leader_kill(cluster, pipeline, i % BENCH_TOPIC_PARTITIONS))
        await asyncio.sleep(SETTLE_SECONDS)
    await wait_caught_up(pipeline, "the consumer group caught up after the kills")
    killing = Phase("leader kills", first_kill, time.monotonic())
    failed_before = pipeline.failed_batches()
    restarts = await rolling_restart(cluster, pipeline)
    await wait_caught_up(pipeline, "the consumer group caught up after the rolling restart")
    await asyncio.sleep(SETTLE_SECONDS)
    rolling = Phase("rolling restart", killing.end, time.monotonic())
    return Failover(
        runs, restarts, [steady, killing, rolling], rolling_failed=pipeline.failed_since(failed_before)
    )


async def _check_topic(pipeline: Pipeline, result: Failover) -> None:
    """Read the whole topic back (read_committed): every row at least once, nothing else, keys in order."""
    writer = pipeline.writer
    first_seen: dict[bytes, list[int]] = defaultdict(list)
    found: dict[int, tuple[int, int]] = {}  # row -> (partition, offset) of its first record

    def record(message: ConsumerRecord[bytes, bytes]) -> None:
        event_id = dict(message.headers).get(HEADER_EVENT_ID, b"").decode()
        row = writer.row_of.get(event_id)
        if row is None or message.key is None:
            result.foreign += 1
        elif row not in found:
            found[row] = (message.partition, message.offset)
            first_seen[message.key].append(row)

    result.rows = writer.count
    result.on_topic = await count_records(
        pipeline.bootstrap, pipeline.topic, BENCH_TOPIC_PARTITIONS, expected=writer.count, on_record=record
    )
    result.distinct = len(found)
    result.out_of_order = sum(1 for key, rows in writer.written.items() if first_seen.get(key) != rows)
    unapplied = [row for row in found if row not in pipeline.applied]
    if unapplied:
        detail = await _unapplied(pipeline, unapplied, found)
        _progress(f"rows on the topic the consumer group never applied: {detail}")


async def _unapplied(pipeline: Pipeline, rows: list[int], found: Mapping[int, tuple[int, int]]) -> str:
    """Where the rows the consumer group missed are, and what the group stored about them."""
    event_ids = {row: event_id for event_id, row in pipeline.writer.row_of.items()}
    schema = pipeline.schema.name.quoted
    async with pipeline.schema.pool.acquire() as conn:
        positions = await stored_positions(conn, pipeline.schema.name, pipeline.group)
        dead = await conn.fetchval(f"SELECT count(*) FROM {schema}.consumer_dead_letters")
        processed = [
            await conn.fetchrow(
                f"SELECT kafka_partition, kafka_offset FROM {schema}.processed_events WHERE event_id = $1",
                uuid.UUID(event_ids[row]),
            )
            for row in rows[:UNAPPLIED_SHOWN]
        ]
    shown = [
        f"row {row} at {found[row]}, processed_events {dict(done) if done else None}"
        for row, done in zip(rows, processed, strict=False)
    ]
    return (
        f"{len(rows)}: {'; '.join(shown)}; stored positions {{partition: next offset}} "
        f"{ {tp.partition: offset for tp, offset in sorted(positions.items())} }; dead letters {dead}; "
        f"events applied that no row wrote {pipeline.unknown_applied}"
    )


# -- report ---------------------------------------------------------------------------------------------


def _reasons(failed: Mapping[str, float]) -> str:
    return ", ".join(f"{reason} {count:.0f}" for reason, count in sorted(failed.items())) or "none"


def _seconds(samples: Sequence[float]) -> dict[str, float]:
    latency = Latency.of_seconds(samples)
    return {
        "count": latency.count,
        "p50": round(latency.p50_ms / 1000, 3),
        "p99": round(latency.p99_ms / 1000, 3),
        "max": round(latency.max_ms / 1000, 3),
    }


def kills_text(run: Failover, counts: BenchCounts, *, kills: int) -> str:
    counts.expect("leader kills measured", len(run.kills), kills)
    table = render_table(
        "(c) Leader SIGKILL -> first event published after it on that partition (the commit of the relay "
        "shard's first Kafka transaction begun after the kill); leader moved = the cluster's metadata names "
        "another leader; shipped relay under a steady writer",
        ["kill", "partition", "node", "leader moved s", "window s", "relay's batches failed",
         "restart -> in sync s"],
        [
            [i, k.partition, k.node, k.leader_moved_seconds, k.window_seconds, _reasons(k.failed_batches),
             k.in_sync_seconds]
            for i, k in enumerate(run.kills, 1)
        ],
    )  # fmt: skip
    window = _seconds([k.window_seconds for k in run.kills])
    moved = _seconds([k.leader_moved_seconds for k in run.kills])
    met = window["count"] > 0 and window["p99"] <= GOAL_KILL_P99_SECONDS
    goal = (
        f"goal: leader kill -> first event published after it, p99 <= {GOAL_KILL_P99_SECONDS:.0f} s -> "
        f"p50 {window['p50']:.2f} s, p99 {window['p99']:.2f} s, max {window['max']:.2f} s over "
        f"{window['count']:.0f} kills (leader moved: p50 {moved['p50']:.2f} s): {_verdict(met)}"
    )
    return f"{table}\n{goal}"


def rolling_text(run: Failover, pipeline: Pipeline) -> str:
    restarts = render_table(
        "(c) Rolling restart: each broker stopped (SIGTERM, controlled shutdown) and started, every replica "
        "back in sync before the next",
        ["node", "stop s", "start -> in sync s"],
        [[r.node, r.stop_seconds, r.in_sync_seconds] for r in run.restarts],
    )
    rows: list[list[Cell]] = []
    for phase in run.phases:
        peak, at, samples = pipeline.lag_peak(phase)
        published = _seconds(pipeline.publish_waits(phase))
        applied = _seconds(pipeline.apply_waits(phase))
        rows.append(
            [
                phase.name,
                phase.end - phase.start,
                samples,
                peak,
                at,
                applied["count"],
                published["p99"],
                published["max"],
                applied["p50"],
                applied["p99"],
                applied["max"],
            ]
        )
    lag = render_table(
        "(c) Consumer lag (IdempotentConsumer, one group member: the topic's last stable offsets less its "
        "stored positions, sampled every 100 ms), and each row's wait from its outbox COMMIT, s: until its "
        "Kafka transaction committed (published) and until the consumer applied it",
        ["phase", "s", "samples", "lag peak", "at s", "rows", "pub p99", "pub max", "apply p50", "apply p99",
         "apply max"],
        rows,
    )  # fmt: skip
    peak, at, _ = pipeline.lag_peak(run.rolling)
    steady, _, _ = pipeline.lag_peak(run.phases[0])
    longest = _seconds(pipeline.apply_waits(run.rolling))["max"]
    line = (
        f"measured: consumer-lag peak during the rolling restart of all {len(run.restarts)} brokers -> "
        f"{peak:,} records ({at:.1f} s into it; steady flow: {steady:,}), longest wait {longest:.2f} s, "
        f"relay batches failed: {_reasons(run.rolling_failed)}; "
        f"{pipeline.missed_samples} lag samples missed (no answer within {LAG_SAMPLE_TIMEOUT_SECONDS:.0f} s)"
    )
    return f"{restarts}\n\n{lag}\n{line}"


def delivery_text(run: Failover, counts: BenchCounts) -> str:
    ok = [
        counts.expect("failover: rows on the topic at least once", run.distinct, run.rows),
        counts.expect("failover: records on the topic that no row wrote", run.foreign, 0),
        counts.expect("failover: keys not in commit order", run.out_of_order, 0),
        counts.expect("failover: rows the consumer group applied", run.applied, run.rows),
        counts.expect(
            "failover: events the consumer group applied that no row wrote", run.applied_foreign, 0
        ),
    ]
    return render_table(
        "(c) Delivery through the failovers (the whole topic read back by a read_committed consumer)",
        ["rows written", "records", "distinct rows", "duplicates", "foreign", "keys out of order", "applied",
         "failed batches"],
        [
            [
                run.rows,
                run.on_topic,
                BenchCounts.mark(ok[0], f"{run.distinct:,}"),
                run.duplicates,
                BenchCounts.mark(ok[1], f"{run.foreign:,}"),
                BenchCounts.mark(ok[2], f"{run.out_of_order:,}"),
                BenchCounts.mark(ok[3] and ok[4], f"{run.applied:,}"),
                _reasons(run.failed_batches),
            ]
        ],
    )  # fmt: skip


def summary_of(run: Throughput, failed: Failover, pipeline: Pipeline) -> dict[str, object]:
    peak, _, _ = pipeline.lag_peak(failed.rolling)
    return {
        "producer_performance": {p.label: p.as_dict() for p in run.perf},
        "relay": run.relay.as_dict(),
        "relay_vs_perf": round(run.ratio, 3),
        "leader_kill_window_s": {
            **_seconds([k.window_seconds for k in failed.kills]),
            "kills": [dataclasses.asdict(k) for k in failed.kills],
        },
        "phases": {
            phase.name: {
                "seconds": round(phase.end - phase.start, 1),
                "lag_peak_records": pipeline.lag_peak(phase)[0],
                "publish_wait_s": _seconds(pipeline.publish_waits(phase)),
                "apply_wait_s": _seconds(pipeline.apply_waits(phase)),
            }
            for phase in failed.phases
        },
        "rolling_restart": {
            "lag_peak_records": peak,
            "failed_batches": failed.rolling_failed,
            "restarts": [dataclasses.asdict(r) for r in failed.restarts],
        },
        "lag_samples_missed": pipeline.missed_samples,
        "delivery": {
            "rows": failed.rows,
            "records": failed.on_topic,
            "distinct": failed.distinct,
            "duplicates": failed.duplicates,
            "applied": failed.applied,
            "failed_batches": failed.failed_batches,
        },
    }


async def _run(args: argparse.Namespace, counts: BenchCounts) -> dict[str, object]:
    for name, level in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(level)
    shared = ensure_stack(("pg",))  # PostgreSQL only: the stack's Kafka is neither used nor touched
    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    started = time.monotonic()
    _progress("starting a private three-node Kafka cluster on free loopback ports")
    async with private_cluster() as cluster:
        stack = dataclasses.replace(shared, kafka_bootstrap=cluster.layout.bootstrap)
        _emit(
            f"yovision cluster benchmark, {date}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"load average at start {os.getloadavg()[0]:.2f}; private cluster {stack.kafka_bootstrap} "
            f"(replication 3, min.insync.replicas 2), up in {time.monotonic() - started:.0f} s"
        )
        run = await throughput(stack, args)
        for perf in run.perf:
            counts.expect(f"cluster {perf.label}: records", perf.records, args.perf_records)
        _emit(throughput_text(run, counts))
        _progress(
            f"failovers: steady writer {args.rate:,.0f} rows/s, {args.kills} leader kills, rolling restart"
        )
        failed, pipeline = await failover(stack, cluster, args)
    _emit(kills_text(failed, counts, kills=args.kills))
    _emit(rolling_text(failed, pipeline))
    _emit(delivery_text(failed, counts))
    wall = time.monotonic() - started
    _emit(f"cluster benchmark: {wall:.0f} s in all, load average at the end {os.getloadavg()[0]:.2f}")
    summary = summary_of(run, failed, pipeline)
    summary["date"] = date
    summary["wall_s"] = round(wall)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    args = _parse_args(argv)
    counts = BenchCounts()
    summary = run_cleanly(_run(args, counts))
    summary["short_counts"] = counts.short
    print(JSON_PREFIX + json.dumps({"cluster": summary}, separators=(",", ":"), sort_keys=True), flush=True)
    counts.exit_if_short("bench --cluster")


if __name__ == "__main__":
    main()
