"""Lease claim + complete rate: `LeaseTable.claim` + `fenced_update` against a plain locking queue.

Each variant drains the same number of fresh pending jobs with CONCURRENT_WORKERS workers (one connection
each, all in this process):

- ``lease_commit_per_row``: `claim` (its own transaction), then one `fenced_update` per job, each committed
  on its own -- how a worker that completes jobs one by one uses the API.
- ``lease_commit_per_batch``: `claim`, then the batch's `fenced_update`s in one transaction (same API,
  the commit count of the raw baseline, so the difference is the lease bookkeeping alone).
- ``raw_locked``: one transaction per batch: `SELECT ... FOR UPDATE SKIP LOCKED`, a plain `UPDATE` per job,
  commit. No lease columns, no fencing; a crashed worker's jobs are freed by its transaction's rollback.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bench.infra import BenchSchema
from bench.stats import Latency, Stopwatch, per_second
from yovision_platform.errors import LeaseLost
from yovision_platform.storage import DbConnection, Identifier, LeaseTable

__all__ = ["LEASE_VARIANTS", "LeaseRun", "run_lease_variant"]

CONCURRENT_WORKERS = 2
LEASE_SECONDS = 30.0
PENDING = "status = 'pending'"


@dataclass
class WorkerTimes:
    claim: list[float] = field(default_factory=list)
    complete: list[float] = field(default_factory=list)
    commit: list[float] = field(default_factory=list)
    completed: int = 0
    lease_lost: int = 0


@dataclass(frozen=True)
class LeaseRun:
    variant: str
    jobs: int
    completed: int
    lease_lost: int
    claim_limit: int
    wall_seconds: float
    cpu_seconds: float
    claim_latency: Latency
    complete_latency: Latency
    commit_latency: Latency

    @property
    def ops_per_second(self) -> float:
        return per_second(self.completed, self.wall_seconds)

    def as_dict(self) -> dict[str, object]:
        return {
            "jobs": self.jobs,
            "completed": self.completed,
            "lease_lost": self.lease_lost,
            "claim_limit": self.claim_limit,
            "workers": CONCURRENT_WORKERS,
            "ops_per_s": round(self.ops_per_second),
            "wall_s": round(self.wall_seconds, 3),
            "cpu_s": round(self.cpu_seconds, 3),
            "claim_latency": self.claim_latency.as_dict(),
            "complete_latency": self.complete_latency.as_dict(),
            "commit_latency": self.commit_latency.as_dict(),
        }


Worker = Callable[[DbConnection, BenchSchema, str, int, WorkerTimes], Awaitable[None]]


def _jobs(schema: BenchSchema) -> LeaseTable:
    return LeaseTable(schema.name, Identifier("jobs"))


async def _lease_worker(
    conn: DbConnection, schema: BenchSchema, owner: str, limit: int, times: WorkerTimes, *, batch_commit: bool
) -> None:
    table = _jobs(schema)
    done = {"status": "done", "result": owner}
    while True:
        started = time.perf_counter()
        claimed = await table.claim(
            conn, owner, lease_seconds=LEASE_SECONDS, limit=limit, due_condition=PENDING
        )
        if not claimed:
            return
        times.claim.append(time.perf_counter() - started)
        transaction = conn.transaction() if batch_commit else None
        if transaction is not None:
            await transaction.start()
        for job in claimed:
            started = time.perf_counter()
            try:
                await table.fenced_update(conn, job.row_id, job.lease, done)
                times.completed += 1
            except LeaseLost:
                times.lease_lost += 1
            times.complete.append(time.perf_counter() - started)
        if transaction is not None:
            started = time.perf_counter()
            await transaction.commit()
            times.commit.append(time.perf_counter() - started)


async def lease_commit_per_row(
    conn: DbConnection, schema: BenchSchema, owner: str, limit: int, times: WorkerTimes
) -> None:
    await _lease_worker(conn, schema, owner, limit, times, batch_commit=False)


async def lease_commit_per_batch(
    conn: DbConnection, schema: BenchSchema, owner: str, limit: int, times: WorkerTimes
) -> None:
    await _lease_worker(conn, schema, owner, limit, times, batch_commit=True)


async def raw_locked(
    conn: DbConnection, schema: BenchSchema, owner: str, limit: int, times: WorkerTimes
) -> None:
    table = f"{schema.name.quoted}.jobs"
    select = f"SELECT id FROM {table} WHERE {PENDING} ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED"
    update = f"UPDATE {table} SET status = 'done', result = $2 WHERE id = $1"
    while True:
        transaction = conn.transaction()
        await transaction.start()
        started = time.perf_counter()
        rows = await conn.fetch(select, limit)
        if not rows:
            await transaction.rollback()
            return
        times.claim.append(time.perf_counter() - started)
        for row in rows:
            started = time.perf_counter()
            await conn.execute(update, row["id"], owner)
            times.complete.append(time.perf_counter() - started)
            times.completed += 1
        started = time.perf_counter()
        await transaction.commit()
        times.commit.append(time.perf_counter() - started)


LEASE_VARIANTS: dict[str, Worker] = {
    "lease_commit_per_row": lease_commit_per_row,
    "lease_commit_per_batch": lease_commit_per_batch,
    "raw_locked": raw_locked,
}


async def _add_pending_jobs(schema: BenchSchema, count: int) -> None:
    await schema.pool.execute(
        f"INSERT INTO {schema.name.quoted}.jobs (payload) "
        "SELECT 'job-' || g FROM generate_series(1, $1) AS g",
        count,
    )


async def run_lease_variant(variant: str, schema: BenchSchema, *, jobs: int, claim_limit: int) -> LeaseRun:
    """Add `jobs` pending jobs, then drain them with CONCURRENT_WORKERS workers of `variant`."""
    worker = LEASE_VARIANTS[variant]
    await _add_pending_jobs(schema, jobs)
    times = [WorkerTimes() for _ in range(CONCURRENT_WORKERS)]
    connections = [await schema.pool.acquire() for _ in range(CONCURRENT_WORKERS)]
    try:
        watch = Stopwatch().start()
        await asyncio.gather(
            *(
                worker(conn, schema, f"bench-{variant}-{i}", claim_limit, t)
                for i, (conn, t) in enumerate(zip(connections, times, strict=True))
            )
        )
        watch.stop()
    finally:
        for conn in connections:
            await schema.pool.release(conn)
    return LeaseRun(
        variant=variant,
        jobs=jobs,
        completed=sum(t.completed for t in times),
        lease_lost=sum(t.lease_lost for t in times),
        claim_limit=claim_limit,
        wall_seconds=watch.wall_seconds,
        cpu_seconds=watch.cpu_seconds,
        claim_latency=Latency.of_seconds([s for t in times for s in t.claim]),
        complete_latency=Latency.of_seconds([s for t in times for s in t.complete]),
        commit_latency=Latency.of_seconds([s for t in times for s in t.commit]),
    )
