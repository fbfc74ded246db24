"""The transcode use case: claims durable jobs, runs ffmpeg under a fenced lease, records the outcome (the
loop that drives it, the transcode worker, is `entrypoints/transcode_worker.py`).

One material has at most one live executor across instances: the job row's lease (owner, random token,
DB-clock expiry) plus a session advisory lock on the material held for the whole run. While ffmpeg runs, a
heartbeat renews the lease; when a renewal fails the child is killed and nothing more is written. Success,
failure and release are single fenced transactions.

Recovery: at start-up the worker releases its own predecessor's leases (`AttemptRecovery`), then runs a round
at once; the next round comes when the earliest known lease expires (plus `LEASE_EXPIRY_SLACK_SECONDS`), and
at the latest after `rescan_seconds`, so a job whose executor died is taken over within about a second of its
lease's expiry. Every round and every take-over also removes the temporary folders of dead attempts. A
store outage only waits for the next round. The canonical source is read, never moved or deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from media_worker.domain.keys import output_key, work_folder_name
from media_worker.domain.outputs import OUTPUTS, RETRYABLE_FAILURES, Aborted, Output, TranscodeFailure
from media_worker.service_layer.dependencies import InstanceDependencies
from media_worker.service_layer.metrics import MediaMetrics, TranscodeOutcome
from media_worker.service_layer.ports import (
    ClaimedJob,
    MediaTools,
)
from media_worker.service_layer.recovery import AttemptRecovery
from yovision_platform.errors import LeaseLost
from yovision_platform.observability import context_of, tracer
from yovision_platform.storage import STORE_ERRORS

__all__ = ["JOB_LEASE_SECONDS", "RESCAN_SECONDS", "Transcoder", "WorkerTiming"]

log = logging.getLogger(__name__)
_tracer = tracer(__name__)

JOB_LEASE_SECONDS = 30.0
HEARTBEAT_FRACTION = 3  # renew every lease/3
RESCAN_SECONDS = 60.0
LEASE_EXPIRY_SLACK_SECONDS = (
    0.2  # wake this long after the earliest lease expiry (DB vs local clock, latency)
)
MIN_ROUND_GAP_SECONDS = 0.1  # never spin: at least this between two rounds


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
    """Renews the lease (with the progress reached) in the background; sets `lost` on any failure."""

    def __init__(self, worker: Transcoder, job: ClaimedJob) -> None:
        self._worker = worker
        self.job = job
        self.progress = 0
        self.lost = asyncio.Event()

    async def renew(self) -> None:
        try:
            async with self._worker.uow() as uow:
                await uow.jobs.renew(self.job.job_id, self.job.lease, self._worker.timing.lease_seconds)
                await uow.materials.raise_progress(self.job.material_id, self.progress)
        except Exception:
            self.lost.set()
            raise LeaseLost() from None

    async def run(self) -> None:
        while not self.lost.is_set():
            await asyncio.sleep(self._worker.timing.heartbeat_seconds)
            with contextlib.suppress(LeaseLost):
                await self.renew()


class Transcoder:
    """The transcode use case: claims one due job and runs it (`run_once`), recovers dead attempts; the loop
    that drives it is `entrypoints/transcode_worker.py`."""

    def __init__(
        self,
        dependencies: InstanceDependencies,
        tools: MediaTools,
        *,
        timing: WorkerTiming | None = None,
        metrics: MediaMetrics | None = None,
    ) -> None:
        self.uow = dependencies.uow
        self.locks = dependencies.locks
        self.storage = dependencies.storage
        self.events = dependencies.events
        self.activity = dependencies.activity
        self.tools = tools
        self.instance_id = dependencies.instance_id
        self.timing = timing or WorkerTiming()
        self.metrics = metrics

    @property
    def recovery(self) -> AttemptRecovery:
        return AttemptRecovery(self.uow, self.locks, self.storage, self.instance_id)

    @property
    def draining(self) -> bool:
        """This instance takes no new job (a drain was requested)."""
        return self.activity.draining

    async def recover_at_start(self) -> None:
        """Release this instance id's predecessor's leases and sweep dead attempts' `outputs/` folders: before
        the first claim, so no lease of this process is taken for dead."""
        await self.recovery.release_predecessor_leases()
        await self.recovery.sweep_output_folders()

    async def sweep_work_folders(self) -> None:
        """Remove the `work/` folders of dead attempts (every round)."""
        await self.recovery.sweep_work_folders()

    async def next_round_in(self) -> float:
        """Seconds until the next round: just after the earliest known lease expiry, at most the rescan."""
        try:
            async with self.uow() as uow:
                expiry = await uow.jobs.next_lease_expiry_in()
        except STORE_ERRORS:
            return self.timing.rescan_seconds
        return self.timing.next_round_in(expiry)

    async def _sweep_after(self, material_id: uuid.UUID) -> None:
        """Remove dead attempts' folders of this material (its lock is held) and of `work/`; a failure to
        sweep never fails the job, the next round sweeps again."""
        try:
            await self.recovery.sweep_work_folders()
            await self.recovery.sweep_output_folders([material_id], lock_held=True)
        except STORE_ERRORS as exc:
            log.warning("sweep of dead attempts failed", extra={"error_code": type(exc).__name__})

    async def run_once(self, stop: asyncio.Event | None = None) -> bool:
        """Claim and execute one due job; False when none was due."""
        async with self.uow() as uow:
            claimed = await uow.jobs.claim(self.instance_id, self.timing.lease_seconds)
        if claimed is None:
            return False
        with self.activity.job():
            await self._execute(claimed, stop or asyncio.Event())
        return True

    async def _execute(self, claimed: ClaimedJob, stop: asyncio.Event) -> None:
        async with self.locks.material(claimed.material_id) as held:
            if held:
                await self._execute_locked(claimed, stop)
                return
        with contextlib.suppress(LeaseLost):  # another executor still runs it: hand the job back
            await self._release(claimed)

    async def _release(self, claimed: ClaimedJob) -> None:
        async with self.uow() as uow:
            await uow.jobs.release(claimed.job_id, claimed.lease)
            await uow.materials.back_to_pending(claimed.material_id)

    async def _execute_locked(self, claimed: ClaimedJob, stop: asyncio.Event) -> None:
        """The transcode, in a span of the trace of the work that queued the job (the upload)."""
        with _tracer.start_as_current_span(
            "transcode",
            context=context_of(claimed.trace_parent),
            attributes={"yovision.material_id": str(claimed.material_id)},
        ):
            await self._transcode(claimed, stop)

    async def _transcode(self, claimed: ClaimedJob, stop: asyncio.Event) -> None:
        job_id, material_id, lease = claimed.job_id, claimed.material_id, claimed.lease
        started = time.monotonic()
        try:
            async with self.uow() as uow:
                attempt = await uow.jobs.start(job_id, lease)
                material = await uow.materials.set_processing(material_id)
                await self.events.emit(
                    uow.outbox, "TranscodeStarted", str(material_id), self._ids(job_id, attempt)
                )
        except LeaseLost:
            return
        await self._sweep_after(material_id)  # a dead attempt of this job is taken over: drop its files
        done = False
        keeper = _LeaseKeeper(self, claimed)
        abort = asyncio.Event()
        heartbeat = asyncio.create_task(keeper.run())
        relay_abort = asyncio.create_task(self._first_of(keeper.lost, stop, abort))
        work_name = work_folder_name(job_id, lease.token)
        work = self.storage.work_dir(work_name)
        try:
            refs = await self._render_all(material.source_key, claimed, work, keeper, abort)
            await keeper.renew()  # the lease must still be ours before anything is recorded
            await self._record_done(claimed, attempt, refs, started)
            done = True
            self._count(TranscodeOutcome.DONE)
        except TranscodeFailure as failure:
            try:
                await self._record_failed(claimed, attempt, failure.code)
                self._count(TranscodeOutcome.FAILED)
            except LeaseLost:
                self._count(TranscodeOutcome.ABORTED)
        except (Aborted, LeaseLost):
            self._count(TranscodeOutcome.ABORTED)
            if stop.is_set() and not keeper.lost.is_set():
                with contextlib.suppress(LeaseLost):
                    await self._release(claimed)
            log.info("transcode aborted", extra={"reason": "lease_lost" if keeper.lost.is_set() else "stop"})
        finally:
            heartbeat.cancel()
            relay_abort.cancel()
            await self.storage.remove_work_dir(work_name)
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
        self, source_key: str, claimed: ClaimedJob, work: Path, keeper: _LeaseKeeper, abort: asyncio.Event
    ) -> dict[str, str]:
        if not self.storage.has_file(source_key):
            raise TranscodeFailure("source_missing")
        source = self.storage.local_path(source_key)
        rendered: list[tuple[Output, Path]] = []
        for output in OUTPUTS:
            target = work / output.file_name
            await self.tools.render(source, output, target, abort)
            await self.tools.verify(output, target)
            keeper.progress = output.progress_after
            rendered.append((output, target))
        await keeper.renew()
        refs: dict[str, str] = {}
        for output, target in rendered:
            key = output_key(claimed.material_id, claimed.lease.token, output.file_name)
            refs[output.kind] = (await self.storage.put_file(target, key)).key
        return refs

    def _ids(self, job_id: uuid.UUID, attempt: int) -> dict[str, object]:
        return {"job_id": str(job_id), "instance_id": self.instance_id, "attempt": attempt}

    async def _record_done(
        self, claimed: ClaimedJob, attempt: int, refs: dict[str, str], started: float
    ) -> None:
        duration_ms = int((time.monotonic() - started) * 1000)
        payload = {"duration_ms": duration_ms, "outputs": [output.kind for output in OUTPUTS]}
        await self._record(claimed, attempt, "TranscodeCompleted", payload, refs=refs)

    async def _record_failed(self, claimed: ClaimedJob, attempt: int, code: str) -> None:
        payload = {"error_code": code, "retryable": code in RETRYABLE_FAILURES}
        await self._record(claimed, attempt, "TranscodeFailed", payload, failure=code)

    async def _record(
        self,
        claimed: ClaimedJob,
        attempt: int,
        event_type: str,
        payload: dict[str, object],
        *,
        refs: dict[str, str] | None = None,
        failure: str | None = None,
    ) -> None:
        """One fenced transaction: the job's end, the material's outcome (`refs` when done, the `failure`
        code otherwise; the material row is locked first) and the event."""
        state = "done" if failure is None else "failed"
        async with self.uow() as uow:
            await uow.jobs.finish(claimed.job_id, claimed.lease, state=state, error_code=failure)
            await uow.materials.lock(claimed.material_id)
            if failure is None:
                assert refs is not None
                await uow.materials.complete(claimed.material_id, refs)
            else:
                await uow.materials.fail(claimed.material_id, failure)
            ids = self._ids(claimed.job_id, attempt)
            await self.events.emit(uow.outbox, event_type, str(claimed.material_id), {**ids, **payload})
