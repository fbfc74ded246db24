"""`apply`: delete, one by one, the report's candidates that are still owned_stale -- or nothing at all.

Order of work (every refusal before the gate deletes nothing and says why with a stable code):
 1. input is validated by the caller (actor, scan id, confirmation syntax);
 2. one apply at a time (a session advisory lock; a crashed apply releases it with its connection);
 3. the report must exist and be usable; the confirmation must equal the report's text exactly;
 4. the ownership projection must reach the Kafka end offsets within a bounded wait;
 5. every MediaMTX server is enumerated again and its paths re-classified, per (server, path); an earlier
    `attempting` record whose path is gone is completed as `deleted` (recording a past delete, before and
    whatever the gate decides);
 6. current candidates = report candidates, minus paths already finally disposed, that are still owned_stale
    (the target set can only shrink); the gate (domain.gate.check_fleet_gate: the whole batch, then each
    server on its own) is checked on them;
 7. each candidate: re-check the claim, record `attempting`, DELETE exactly that name on exactly its server,
    record the outcome and a PathDisposed event in one transaction. `attempting` survives a crash, so a
    re-run knows the delete was sent: a path then found absent is recorded `deleted` (step 5), never lost.
A blocked run is recorded (apply_runs) with an ApplyBlocked event. Re-running is idempotent: final outcomes
(deleted, already_absent) are kept and never redone; failed and skipped paths are re-evaluated.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace

from orphan_scanner.domain import limits
from orphan_scanner.domain.classify import ServerPath, classify
from orphan_scanner.domain.errors import ScanNotFound, ScanNotUsable
from orphan_scanner.domain.gate import (
    BlockReason,
    FleetGateInput,
    GateBlock,
    check_fleet_gate,
    report_expired,
)
from orphan_scanner.domain.inputs import confirmation_text
from orphan_scanner.domain.records import ApplyEnd, ApplyRun, Outcome, PathDisposition, StoredReport
from orphan_scanner.service_layer.events import OrphanEvents
from orphan_scanner.service_layer.ports import (
    ApplyLock,
    OrphanUnitOfWork,
    PathFleet,
    ProjectionProgress,
    UnitOfWorkFactory,
)
from orphan_scanner.service_layer.scanner import enumerate_fleet
from yovision_platform.mediamtx import MediaMtxError

log = logging.getLogger(__name__)

__all__ = ["Applier", "ApplyItemOutcome", "ApplyResult", "ApplyStatus", "Outcome"]


class ApplyStatus(enum.StrEnum):
    COMPLETED = "completed"
    PARTIAL = "partial"
    BLOCKED = "blocked"


@dataclass(frozen=True)
class ApplyItemOutcome:
    path: ServerPath
    outcome: str
    error_code: str | None = None
    # True when recorded by an earlier apply of the same scan (reported, not redone)
    earlier: bool = False


@dataclass
class ApplyResult:
    apply_id: uuid.UUID
    scan_id: uuid.UUID
    status: ApplyStatus
    reason_code: BlockReason | None = None
    blocked_media_server_id: str | None = None
    report_candidates: int = 0
    current_total: int | None = None
    current_candidates: int | None = None
    items: list[ApplyItemOutcome] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return dict(Counter(i.outcome for i in self.items if not i.earlier))

    def end(self) -> ApplyEnd:
        """The run's record; a blocked run counts no outcome."""
        return ApplyEnd(
            status=self.status.value,
            reason_code=self.reason_code.value if self.reason_code else None,
            current_total=self.current_total,
            current_candidates=self.current_candidates,
            counts={} if self.status is ApplyStatus.BLOCKED else self.counts(),
            blocked_media_server_id=self.blocked_media_server_id,
        )


class Applier:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        lock: ApplyLock,
        events: OrphanEvents,
        mediamtx: PathFleet,
        progress: ProjectionProgress,
        *,
        instance_id: str,
        catch_up_timeout_seconds: float = limits.CATCH_UP_TIMEOUT_SECONDS_DEFAULT,
    ) -> None:
        self._uow = uow
        self._lock = lock
        self._events = events
        self._mediamtx = mediamtx
        self._progress = progress
        self._instance_id = instance_id
        self._catch_up_timeout = catch_up_timeout_seconds

    async def apply(self, scan_id: uuid.UUID, *, actor: str, confirmation: str) -> ApplyResult:
        """`actor` and `confirmation` must already be validated for shape (domain.inputs). Raises
        ApplyRefused (ScanNotFound, ScanNotUsable, ApplyInProgress) before anything is recorded."""
        async with self._lock.hold():
            async with self._uow() as uow:
                report = await uow.reports.load(scan_id)
                earlier = await uow.reports.dispositions(scan_id)
            if report is None:
                raise ScanNotFound()
            if report.status != "complete":
                raise ScanNotUsable()
            result = ApplyResult(
                uuid.uuid4(), scan_id, ApplyStatus.BLOCKED, report_candidates=len(report.candidates)
            )
            if confirmation != confirmation_text(scan_id, len(report.candidates)):
                return await self._block(result, actor, GateBlock(BlockReason.CONFIRMATION_MISMATCH))
            pending = {p for p in report.candidates if not (p in earlier and earlier[p].final)}
            result.items = [
                ApplyItemOutcome(p, d.outcome, d.error_code, earlier=True)
                for p, d in sorted(earlier.items())
                if d.final
            ]
            if report.candidates and not pending:  # all done earlier: report it, even after expiry
                result.status = ApplyStatus.COMPLETED
                await self._record_noop(result, actor)
                return result
            if report_expired(report.age_ms):
                return await self._block(result, actor, GateBlock(BlockReason.REPORT_EXPIRED))
            return await self._apply_pending(
                result,
                report,
                pending,
                earlier_attempting={p for p, d in earlier.items() if d.outcome == Outcome.ATTEMPTING},
                actor=actor,
            )

    async def _apply_pending(
        self,
        result: ApplyResult,
        report: StoredReport,
        pending: set[ServerPath],
        *,
        earlier_attempting: set[ServerPath],
        actor: str,
    ) -> ApplyResult:
        lagging = await self._progress.wait(self._catch_up_timeout)
        if lagging is not None:
            return await self._block(result, actor, GateBlock(lagging))
        # every registered server (the gate needs each one's total), and the server of every pending path
        # (one no longer registered fails the enumeration: nothing is deleted)
        in_report = {path.media_server_id for path in pending | earlier_attempting}
        servers = tuple(sorted(set(self._mediamtx.ids) | in_report))
        try:
            names = await enumerate_fleet(self._mediamtx, servers)
        except MediaMtxError as exc:
            log.warning("apply: MediaMTX enumeration failed", extra={"error_code": exc.code})
            return await self._block(result, actor, GateBlock(BlockReason.ENUMERATION_FAILED))
        async with self._uow() as uow:
            await self._start(uow, result, actor)
        observed = set(names)
        # Recovery, not a deletion: an earlier run sent this DELETE and stopped before recording the result.
        for path in sorted(earlier_attempting - observed):
            await self._record(result, report, path, Outcome.DELETED, None, actor)
            pending.discard(path)
        if report.candidates and not pending:
            result.status = ApplyStatus.COMPLETED
            await self._finish(result)
            return result
        async with self._uow() as uow:
            current = classify(
                names, await uow.projection.claimed_paths(names), await uow.projection.last_owners(names)
            )
            age_ms = await uow.reports.report_age_ms(report.scan_id)
        candidates = {p for p in pending if p in current.owned_stale}
        result.current_total = current.observed_total
        result.current_candidates = len(candidates)
        block = check_fleet_gate(
            FleetGateInput(
                report_candidates=set(report.candidates),
                current_candidates=candidates,
                current_totals=current.totals_by_server(),
                report_age_ms=age_ms,
            )
        )
        if block is not None:
            return await self._block(result, actor, block)
        for path in sorted(pending - candidates):
            # gone from MediaMTX (removed by someone else), or claimed again by an enabled device
            outcome = Outcome.ALREADY_ABSENT if path not in observed else Outcome.SKIPPED_NOT_STALE
            await self._record(result, report, path, outcome, None, actor)
        for path in sorted(candidates):
            await self._delete_one(result, report, path, actor)
        counts = result.counts()
        result.status = ApplyStatus.PARTIAL if counts.get(Outcome.FAILED, 0) else ApplyStatus.COMPLETED
        await self._finish(result)
        log.info(
            "apply finished", extra={"scan_id": str(report.scan_id), "status": result.status.value, **counts}
        )
        return result

    async def _start(self, uow: OrphanUnitOfWork, result: ApplyResult, actor: str) -> None:
        """The apply run (status running); idempotent, so a run that then blocks can call it again."""
        run = ApplyRun(result.apply_id, result.scan_id, actor, self._instance_id, result.report_candidates)
        await uow.reports.start_apply(run)

    async def _finish(self, result: ApplyResult) -> None:
        async with self._uow() as uow:
            await uow.reports.finish_apply(result.apply_id, result.end())

    async def _delete_one(
        self, result: ApplyResult, report: StoredReport, path: ServerPath, actor: str
    ) -> None:
        item = PathDisposition(report.scan_id, result.apply_id, actor, path, Outcome.ATTEMPTING.value)
        async with self._uow() as uow:
            claimed = bool(await uow.projection.claimed_paths([path]))
            if claimed:
                item = replace(item, outcome=Outcome.SKIPPED_NOT_STALE.value)
                await self._write_outcome(uow, report, item)
            else:  # committed before the DELETE is sent: a crash after it leaves `attempting` behind
                await uow.reports.record_disposition(item)
        if claimed:
            result.items.append(ApplyItemOutcome(path, item.outcome))
            return
        try:
            existed = await self._mediamtx.client(path.media_server_id).delete_path(path.path_name)
        except MediaMtxError as exc:
            log.warning("apply: delete failed", extra={"error_code": exc.code})
            await self._record(result, report, path, Outcome.FAILED, exc.code, actor)
            return
        await self._record(
            result, report, path, Outcome.DELETED if existed else Outcome.ALREADY_ABSENT, None, actor
        )

    async def _record(
        self,
        result: ApplyResult,
        report: StoredReport,
        path: ServerPath,
        outcome: Outcome,
        error_code: str | None,
        actor: str,
    ) -> None:
        """The path's outcome and its PathDisposed event, in one transaction."""
        item = PathDisposition(report.scan_id, result.apply_id, actor, path, outcome.value, error_code)
        async with self._uow() as uow:
            await self._write_outcome(uow, report, item)
        result.items.append(ApplyItemOutcome(path, item.outcome, error_code))

    async def _write_outcome(
        self, uow: OrphanUnitOfWork, report: StoredReport, item: PathDisposition
    ) -> None:
        await uow.reports.record_disposition(item)
        device = report.candidates.get(item.path)
        payload = {
            "path_name": item.path.path_name,
            "media_server_id": item.path.media_server_id,
            "device_id": str(device) if device else None,
            "actor": item.actor,
            "outcome": item.outcome,
            "error_code": item.error_code,
        }
        await uow.outbox.enqueue(
            self._events.message("PathDisposed", report.scan_id, payload, correlation_id=item.apply_id)
        )

    async def _block(self, result: ApplyResult, actor: str, block: GateBlock) -> ApplyResult:
        reason = block.reason
        result.status = ApplyStatus.BLOCKED
        result.reason_code = reason
        result.blocked_media_server_id = block.media_server_id
        async with self._uow() as uow:
            await self._start(uow, result, actor)
            await uow.reports.finish_apply(result.apply_id, result.end())
            await uow.outbox.enqueue(
                self._events.message(
                    "ApplyBlocked",
                    result.scan_id,
                    {
                        "apply_id": str(result.apply_id),
                        "actor": actor,
                        "reason_code": reason.value,
                        "current_total": result.current_total,
                        "report_candidates": result.report_candidates,
                        "current_candidates": result.current_candidates,
                        "media_server_id": block.media_server_id,
                    },
                    correlation_id=result.apply_id,
                )
            )
        log.warning("apply blocked; nothing deleted", extra={"error_code": reason.value})
        return result

    async def _record_noop(self, result: ApplyResult, actor: str) -> None:
        """A run that found everything done by earlier runs: recorded `completed`, no candidate left."""
        async with self._uow() as uow:
            await self._start(uow, result, actor)
            await uow.reports.finish_apply(result.apply_id, replace(result.end(), current_candidates=0))
