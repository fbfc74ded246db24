"""The transcode worker: claims durable jobs, runs ffmpeg under a fenced lease, records the outcome.

One material has at most one live executor across instances: the job row's lease (owner, random token,
DB-clock expiry) plus a session advisory lock on the material held for the whole run. While ffmpeg runs, a
heartbeat renews the lease; when a renewal fails the child is killed and nothing more is written. Success,
failure and release are single fenced transactions.

Recovery: at start-up the worker releases its own predecessor's leases (`AttemptRecovery`), then runs a round
at once; the next round comes when the earliest known lease expires (plus `LEASE_EXPIRY_SLACK_SECONDS`), and
at the latest after `rescan_seconds`, so a job whose executor died is taken over within about a second of its
lease's expiry. Every round and every take-over also removes the temporary folders of dead attempts. A
database outage only waits for the next round. The canonical source is read, never moved or deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import asyncpg

from media_worker.adapters.ffmpeg import OUTPUTS, Aborted, FfmpegTools, OutputSpec, TranscodeFailure
from media_worker.adapters.repository import MediaRepository
from media_worker.adapters.storage import Storage, output_key, work_folder_name
from media_worker.service_layer.activity import Activity
from media_worker.service_layer.events import EventWriter
from media_worker.service_layer.metrics import MediaMetrics, TranscodeOutcome
from media_worker.service_layer.recovery import AttemptRecovery
from yovision_platform.db import DbConnection
from yovision_platform.errors import LeaseLost
from yovision_platform.leases import ClaimedRow, Lease

__all__ = ["JOB_LEASE_SECONDS", "RESCAN_SECONDS", "TranscodeWorker", "WorkerTiming"]

log = logging.getLogger(__name__)
T = TypeVar("T")

JOB_LEASE_SECONDS = 30.0
HEARTBEAT_FRACTION = 3  # renew every lease/3
RESCAN_SECONDS = 60.0
LEASE_EXPIRY_SLACK_SECONDS = (
    0.2  # wake this long after the earliest lease expiry (DB vs local clock, latency)
)
MIN_ROUND_GAP_SECONDS = 0.1  # never spin: at least this between two rounds
DB_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)
RETRYABLE_CODES = frozenset({"ffmpeg_failed", "ffmpeg_missing", "ffprobe_missing", "ffprobe_failed"})


@dataclass(frozen=True)
class WorkerTiming:
    lease_seconds: float = JOB_LEASE_SECONDS
    rescan_seconds: float = RESCAN_SECONDS

    @property
    def heartbeat_seconds(self) -> float:
        return self.lease_seconds / HEARTBEAT_FRACTION

    def next_round_in(self, lease_expiry_in: float | None) -> float:
        """Seconds until the next recovery round: just after the earliest known lease expiry, bounded by
        MIN_ROUND_GAP_SECONDS and `rescan_seconds`; `rescan_seconds` when no lease is known."""
        if lease_expiry_in is None:
            return self.rescan_seconds
        return min(
            self.rescan_seconds, max(MIN_ROUND_GAP_SECONDS, lease_expiry_in + LEASE_EXPIRY_SLACK_SECONDS)
        )


class _LeaseKeeper:
    """Renews the lease in the background; sets `lost` on any failure to renew."""

    def __init__(self, worker: TranscodeWorker, job_id: uuid.UUID, lease: Lease) -> None:
        self._worker = worker
        self.job_id = job_id
        self.lease = lease
        self.progress = 0
        self.lost = asyncio.Event()

    async def renew(self) -> None:
        try:
            async with self._worker.pool.acquire() as conn:
                await self._worker.repo.heartbeat(
                    conn, self.job_id, self.lease, self._worker.timing.lease_seconds, self.progress
                )
        except Exception:
            self.lost.set()
            raise LeaseLost() from None

    async def run(self) -> None:
        while not self.lost.is_set():
            await asyncio.sleep(self._worker.timing.heartbeat_seconds)
            with contextlib.suppress(LeaseLost):
                await self.renew()


class TranscodeWorker:
    def __init__(
        self,
        pool: asyncpg.Pool,
        repo: MediaRepository,
        storage: Storage,
        events: EventWriter,
        activity: Activity,
        tools: FfmpegTools,
        *,
        instance_id: str,
        timing: WorkerTiming | None = None,
        metrics: MediaMetrics | None = None,
    ) -> None:
        self.pool = pool
        self.repo = repo
        self.storage = storage
        self.events = events
        self.activity = activity
        self.tools = tools
        self.instance_id = instance_id
        self.timing = timing or WorkerTiming()
        self.metrics = metrics
        self.wake = asyncio.Event()

    @property
    def recovery(self) -> AttemptRecovery:
        return AttemptRecovery(self.pool, self.repo, self.storage, self.instance_id)

    async def run(self, stop: asyncio.Event) -> None:
        """Recover, process due jobs now, then again at the next lease expiry or rescan (or when woken)
        until `stop`."""
        recovered = False
        while not stop.is_set():
            self.wake.clear()  # a wake-up during the round below makes the wait return at once
            try:
                if not recovered:  # before the first claim, so no lease of this process is taken for dead
                    await self.recovery.release_predecessor_leases()
                    await self.recovery.sweep_output_folders()
                    recovered = True
                await self.recovery.sweep_work_folders()
                while not stop.is_set() and not self.activity.draining and await self.run_once(stop):
                    pass
            except DB_ERRORS as exc:
                log.warning(
                    "transcode round failed; waiting for the next", extra={"error_code": type(exc).__name__}
                )
            waiters = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self.wake.wait())}
            await asyncio.wait(
                waiters, timeout=await self._next_round_in(), return_when=asyncio.FIRST_COMPLETED
            )
            for waiter in waiters:
                waiter.cancel()

    async def _next_round_in(self) -> float:
        try:
            async with self.pool.acquire() as conn:
                expiry = await self.repo.next_lease_expiry_in(conn)
        except DB_ERRORS:
            return self.timing.rescan_seconds
        return self.timing.next_round_in(expiry)

    async def _sweep_after(self, material_id: uuid.UUID) -> None:
        """Remove dead attempts' folders of this material (its lock is held) and of `work/`; a failure to
        sweep never fails the job, the next round sweeps again."""
        try:
            await self.recovery.sweep_work_folders()
            await self.recovery.sweep_output_folders([material_id], lock_held=True)
        except DB_ERRORS as exc:
            log.warning("sweep of dead attempts failed", extra={"error_code": type(exc).__name__})

    async def run_once(self, stop: asyncio.Event | None = None) -> bool:
        """Claim and execute one due job; False when none was due."""
        async with self.pool.acquire() as conn:
            claimed = await self.repo.claim_job(conn, self.instance_id, self.timing.lease_seconds)
        if claimed is None:
            return False
        with self.activity.job():
            await self._execute(claimed, stop or asyncio.Event())
        return True

    async def _execute(self, claimed: ClaimedRow, stop: asyncio.Event) -> None:
        material_id: uuid.UUID = claimed.row["material_id"]
        async with self.pool.acquire() as lock_conn:
            if not await self.repo.try_lock_material(lock_conn, material_id):
                with contextlib.suppress(LeaseLost):
                    await self._in_tx(lambda c: self.repo.release_job(c, claimed.row_id, claimed.lease))
                return
            try:
                await self._execute_locked(claimed, material_id, stop)
            finally:
                await self.repo.unlock_material(lock_conn, material_id)

    async def _in_tx(self, work: Callable[[DbConnection], Awaitable[T]]) -> T:
        async with self.pool.acquire() as conn, conn.transaction():
            return await work(conn)

    async def _execute_locked(self, claimed: ClaimedRow, material_id: uuid.UUID, stop: asyncio.Event) -> None:
        job_id: uuid.UUID = claimed.row_id
        lease = claimed.lease
        started = time.monotonic()

        async def start(conn: DbConnection) -> tuple[int, dict[str, object]]:
            attempt, material = await self.repo.start_job(conn, claimed)
            await self.events.emit(conn, "TranscodeStarted", str(material_id), self._ids(job_id, attempt))
            return attempt, dict(material)

        try:
            attempt, material = await self._in_tx(start)
        except LeaseLost:
            return
        await self._sweep_after(material_id)  # a dead attempt of this job is taken over: drop its files
        done = False
        keeper = _LeaseKeeper(self, job_id, lease)
        abort = asyncio.Event()
        heartbeat = asyncio.create_task(keeper.run())
        relay_abort = asyncio.create_task(self._first_of(keeper.lost, stop, abort))
        work = self.storage.work_dir(work_folder_name(job_id, lease.token))
        try:
            refs = await self._render_all(
                str(material["source_path"]), material_id, lease, work, keeper, abort
            )
            await keeper.renew()  # the lease must still be ours before anything is recorded
            await self._in_tx(
                lambda c: self._record_done(c, job_id, lease, material_id, attempt, refs, started)
            )
            done = True
            self._count(TranscodeOutcome.DONE)
        except TranscodeFailure as failure:
            code = failure.code
            try:
                await self._in_tx(lambda c: self._record_failed(c, job_id, lease, material_id, attempt, code))
                self._count(TranscodeOutcome.FAILED)
            except LeaseLost:
                self._count(TranscodeOutcome.ABORTED)
        except (Aborted, LeaseLost):
            self._count(TranscodeOutcome.ABORTED)
            if stop.is_set() and not keeper.lost.is_set():
                with contextlib.suppress(LeaseLost):
                    await self._in_tx(lambda c: self.repo.release_job(c, job_id, lease))
            log.info("transcode aborted", extra={"reason": "lease_lost" if keeper.lost.is_set() else "stop"})
        finally:
            heartbeat.cancel()
            relay_abort.cancel()
            await asyncio.to_thread(shutil.rmtree, work, True)
            if not done:  # outputs stored before a lost lease or a failed record are garbage
                await self._sweep_after(material_id)

    def _count(self, outcome: TranscodeOutcome) -> None:
        if self.metrics is not None:
            self.metrics.transcodes.labels(outcome=outcome).inc()

    @staticmethod
    async def _first_of(lost: asyncio.Event, stop: asyncio.Event, abort: asyncio.Event) -> None:
        waiters = {asyncio.ensure_future(lost.wait()), asyncio.ensure_future(stop.wait())}
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            abort.set()
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _render_all(
        self,
        source_key: str,
        material_id: uuid.UUID,
        lease: Lease,
        work: Path,
        keeper: _LeaseKeeper,
        abort: asyncio.Event,
    ) -> dict[str, str]:
        source = self.storage.local_path(source_key)
        if not await asyncio.to_thread(source.is_file):
            raise TranscodeFailure("source_missing")
        rendered: list[tuple[OutputSpec, Path]] = []
        for spec in OUTPUTS:
            target = work / spec.file_name
            await self.tools.render(source, spec, target, abort)
            await self.tools.verify(spec, target)
            keeper.progress = spec.progress_after
            rendered.append((spec, target))
        await keeper.renew()
        refs: dict[str, str] = {}
        for spec, target in rendered:
            stored = await self.storage.put_file(target, output_key(material_id, lease.token, spec.file_name))
            refs[spec.kind] = stored.key
        return refs

    def _ids(self, job_id: uuid.UUID, attempt: int) -> dict[str, object]:
        return {"job_id": str(job_id), "instance_id": self.instance_id, "attempt": attempt}

    async def _record_done(
        self,
        conn: DbConnection,
        job_id: uuid.UUID,
        lease: Lease,
        material_id: uuid.UUID,
        attempt: int,
        refs: dict[str, str],
        started: float,
    ) -> None:
        await self.repo.finish_job(conn, job_id, lease, state="done")
        await self.repo.lock_material(conn, material_id)
        await self.repo.complete_material(conn, material_id, refs)
        await self.events.emit(
            conn,
            "TranscodeCompleted",
            str(material_id),
            {
                **self._ids(job_id, attempt),
                "duration_ms": int((time.monotonic() - started) * 1000),
                "outputs": [spec.kind for spec in OUTPUTS],
            },
        )

    async def _record_failed(
        self,
        conn: DbConnection,
        job_id: uuid.UUID,
        lease: Lease,
        material_id: uuid.UUID,
        attempt: int,
        code: str,
    ) -> None:
        await self.repo.finish_job(conn, job_id, lease, state="failed", error_code=code)
        await self.repo.lock_material(conn, material_id)
        await self.repo.fail_material(conn, material_id, code)
        await self.events.emit(
            conn,
            "TranscodeFailed",
            str(material_id),
            {**self._ids(job_id, attempt), "error_code": code, "retryable": code in RETRYABLE_CODES},
        )
