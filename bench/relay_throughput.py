"""Relay throughput: R relay processes (`bench.relay_worker`, the shipped `OutboxRelay.run`) drain one outbox.

The relays start on an empty outbox and settle their shard split first (each holds its share, producers
initialised). Then every message is inserted in **one** transaction; its commit makes all of them visible
at once and starts the clock. The clock stops when every shard's stored cursor has passed that transaction
(all rows share its xid), i.e. every row is in a committed Kafka transaction *and* recorded as such.
Delivery is checked by a read_committed consumer counting the run's topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.enqueue import raw_executemany_writer
from bench.infra import BENCH_TOPIC_PARTITIONS, REPO_ROOT, BenchSchema, BenchTopics, Stack
from bench.produce import count_records
from bench.relay_worker import DSN_ENV
from bench.stats import per_second
from yovision_platform.messaging import OUTBOX_SHARDS, Outbox, OutboxMessage

__all__ = ["RelayRun", "relay_processes", "run_relays", "wait_all_passed"]

BENCH_LEASE_SECONDS = 3.0  # rebalances every second: the split settles fast
SPLIT_TIMEOUT_SECONDS = 60.0
DRAIN_TIMEOUT_SECONDS = 300.0
DRAIN_POLL_SECONDS = 0.01
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class RelayRun:
    client: str
    relays: int
    batch_size: int
    rows: int
    delivered: int
    wall_seconds: float
    relay_cpu_seconds: float

    @property
    def events_per_second(self) -> float:
        return per_second(self.rows, self.wall_seconds)

    @property
    def label(self) -> str:
        return f"relay x{self.relays} ({self.client}, batch {self.batch_size})"

    def as_dict(self) -> dict[str, object]:
        return {
            "client": self.client,
            "relays": self.relays,
            "batch_size": self.batch_size,
            "rows": self.rows,
            "kafka_delivered": self.delivered,
            "events_per_s": round(self.events_per_second),
            "wall_s": round(self.wall_seconds, 3),
            "relay_cpu_s": round(self.relay_cpu_seconds, 3),
        }


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


@contextlib.contextmanager
def relay_processes(
    schema: BenchSchema,
    bootstrap: str,
    prefix: str,
    *,
    relays: int,
    client: str,
    batch_size: int,
    otlp_endpoint: str | None = None,
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`relays` relay processes (`bench.relay_worker`); traced into `otlp_endpoint` when given."""
    env = {**os.environ, DSN_ENV: schema.dsn}
    tracing = ["--otlp-endpoint", otlp_endpoint] if otlp_endpoint else []
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.relay_worker",
                schema.name,
                bootstrap,
                f"bench-relay-{prefix}-{n}",
                f"{prefix}.",
                "--client",
                client,
                "--batch-size",
                str(batch_size),
                "--lease-seconds",
                str(BENCH_LEASE_SECONDS),
                *tracing,
            ],
            env=env,
            cwd=REPO_ROOT,
        )
        for n in range(relays)
    ]
    try:
        yield processes
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def wait_split(schema: BenchSchema, relays: int) -> None:
    """Until `relays` owners hold every shard between them, as evenly as the shard count allows."""
    deadline = time.monotonic() + SPLIT_TIMEOUT_SECONDS
    expected = sorted(
        len(range(i, OUTBOX_SHARDS, min(relays, OUTBOX_SHARDS))) for i in range(min(relays, OUTBOX_SHARDS))
    )
    while time.monotonic() < deadline:
        rows = await schema.pool.fetch(
            f"""SELECT owner, count(*) AS n FROM {schema.name.quoted}.outbox_cursors
                 WHERE outbox = 'outbox' AND owner IS NOT NULL AND lease_expires_at > now() GROUP BY owner"""
        )
        if sorted(r["n"] for r in rows) == expected:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("relays did not split the shards in time")


async def wait_all_passed(
    schema: BenchSchema, xid: int, *, timeout_seconds: float = DRAIN_TIMEOUT_SECONDS
) -> None:
    """Until every shard's stored cursor has passed transaction `xid`."""
    sql = f"""SELECT bool_and(pg_visible_in_snapshot($1::text::xid8, prev_snapshot))
                FROM {schema.name.quoted}.outbox_cursors WHERE outbox = 'outbox'"""
    deadline = time.monotonic() + timeout_seconds
    async with schema.pool.acquire() as conn:
        while not await conn.fetchval(sql, str(xid)):
            if time.monotonic() > deadline:
                raise RuntimeError("the relays did not drain the outbox in time")
            await asyncio.sleep(DRAIN_POLL_SECONDS)


async def insert_in_one_transaction(schema: BenchSchema, messages: Sequence[OutboxMessage]) -> int:
    """Insert every message in one transaction, which wakes every shard's relay at its commit (as
    `Outbox.enqueue_many` does; without it the relays find the rows only at their next idle poll, up to
    `poll_interval_seconds` later, and the drain's clock would time that wait); returns its xid once
    committed."""
    writer = raw_executemany_writer(schema.name)
    async with schema.pool.acquire() as conn:
        async with conn.transaction():
            await writer(conn, messages)
            await Outbox(schema.name).notify_shards(conn, range(OUTBOX_SHARDS))
            xid: int = int(await conn.fetchval("SELECT pg_current_xact_id()::text"))
        return xid


async def run_relays(
    stack: Stack,
    schema: BenchSchema,
    topics: BenchTopics,
    messages: Sequence[OutboxMessage],
    *,
    relays: int,
    client: str,
    batch_size: int,
    run_tag: str = "",
    otlp_endpoint: str | None = None,
) -> RelayRun:
    """`relays` relay processes drain `messages` from `schema` (which must hold no unpublished row).
    `run_tag` tells apart the topics of runs of the same shape in one benchmark; `otlp_endpoint`: the relays
    trace into it (`bench.relay_worker --otlp-endpoint`)."""
    prefix = f"r{relays}-{client}-{batch_size}{run_tag}"
    topic = await topics.for_run(prefix)
    with relay_processes(
        schema,
        stack.kafka_bootstrap,
        prefix,
        relays=relays,
        client=client,
        batch_size=batch_size,
        otlp_endpoint=otlp_endpoint,
    ) as processes:
        await wait_split(schema, relays)
        cpu_before = sum(_cpu_seconds(p.pid) for p in processes)
        xid = await insert_in_one_transaction(schema, messages)
        started = time.perf_counter()
        await wait_all_passed(schema, xid)
        wall = time.perf_counter() - started
        cpu = sum(_cpu_seconds(p.pid) for p in processes) - cpu_before
    delivered = await count_records(
        stack.kafka_bootstrap, topic, BENCH_TOPIC_PARTITIONS, expected=len(messages)
    )
    return RelayRun(client, relays, batch_size, len(messages), delivered, wall, cpu)
