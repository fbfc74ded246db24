"""In-memory fakes of orphan-scanner's ports (`service_layer.ports`), for use-case tests that run in
milliseconds. Each behaves as its real adapter does in everything a use case relies on; the contract suites
in `tests/ports/orphan_scanner/` run the same tests against both. The fakes are single-process and serial:
they model one transaction at a time, not concurrent isolation or row locks.

Times come from one clock, the database's `now()` (`DatabaseClock`: fixed within a unit of work, later in
the next); `age` and `expire` stand in for what tests do with an admin connection on PostgreSQL (age a
report, expire a lease).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Self, TypeVar

from orphan_scanner.domain import limits
from orphan_scanner.domain.classify import Classification, PathClass, ServerPath
from orphan_scanner.domain.errors import ApplyInProgress
from orphan_scanner.domain.gate import BlockReason
from orphan_scanner.domain.records import (
    COUNTED_OUTCOMES,
    ApplyEnd,
    ApplyRun,
    DeviceClaim,
    Disposition,
    NewReport,
    Outcome,
    OwnershipEvidence,
    PathDisposition,
    ReportPosition,
    ReportSummary,
    StoredReport,
)
from yovision_platform.errors import LeaseLost
from yovision_platform.mediamtx import MediaMtxError, is_managed_path_name
from yovision_platform.storage import Lease, MemoryUnitOfWork

__all__ = [
    "Clock",
    "DatabaseClock",
    "MemoryApplyLock",
    "MemoryMediaMtxPaths",
    "MemoryOrphanUnitOfWork",
    "MemoryProjectionProgress",
    "MemoryProjectionStore",
    "MemoryReportReader",
    "MemoryReportStore",
    "MemoryScanLease",
]

K = TypeVar("K")
V = TypeVar("V")
Clock = Callable[[], datetime]
TRANSACTION_TICK = timedelta(microseconds=1)
REPORT_VALIDITY = timedelta(milliseconds=limits.REPORT_VALIDITY_MS)
_MS = timedelta(milliseconds=1)


class DatabaseClock:
    """PostgreSQL's `now()` for the fakes: it stands still within a unit of work, is a microsecond later in
    the next one (`MemoryOrphanUnitOfWork` moves it on entry) and moves further only when a test says
    (`advance`)."""

    def __init__(self) -> None:
        self.current = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.current

    def advance(self, by: timedelta) -> None:
        self.current += by


class Rows(Mapping[K, V], Generic[K, V]):
    """An immutable table of immutable rows. A unit of work's snapshot shares it instead of copying every
    row; a write makes a new table (copy on write)."""

    def __init__(self, rows: Mapping[K, V] | None = None) -> None:
        self._rows: dict[K, V] = dict(rows or {})

    def __getitem__(self, key: K) -> V:
        return self._rows[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def put(self, key: K, value: V) -> Rows[K, V]:
        return Rows({**self._rows, key: value})

    def without(self, keys: Iterable[K]) -> Rows[K, V]:
        gone = set(keys)
        return Rows({k: v for k, v in self._rows.items() if k not in gone})

    def __deepcopy__(self, memo: dict[int, Any]) -> Rows[K, V]:
        return self


class MemoryProjectionStore:
    def __init__(self) -> None:
        self.claims: Rows[uuid.UUID, DeviceClaim] = Rows()
        self.evidence: Rows[tuple[str, str, uuid.UUID], OwnershipEvidence] = Rows()

    async def apply_claim(self, claim: DeviceClaim) -> None:
        stored = self.claims.get(claim.device_id)
        if stored is None or stored.config_version <= claim.config_version:
            self.claims = self.claims.put(claim.device_id, claim)

    async def record_ownership(self, evidence: OwnershipEvidence) -> None:
        key = (evidence.media_server_id, evidence.path_name, evidence.device_id)
        stored = self.evidence.get(key)
        if stored is not None:
            evidence = replace(
                stored,
                first_seen_at=min(stored.first_seen_at, evidence.first_seen_at),
                last_seen_at=max(stored.last_seen_at, evidence.last_seen_at),
            )
        self.evidence = self.evidence.put(key, evidence)

    async def claimed_paths(self, paths: Iterable[ServerPath]) -> set[ServerPath]:
        servers_claiming: dict[str, set[str | None]] = {}
        for c in self.claims.values():
            if c.desired_state == "enabled":
                servers_claiming.setdefault(c.path_name, set()).add(c.media_server_id)
        return {
            path
            for path in paths
            if servers_claiming.get(path.path_name, set()) & {path.media_server_id, None}
        }

    async def last_owners(self, paths: Iterable[ServerPath]) -> dict[ServerPath, uuid.UUID]:
        seen: dict[ServerPath, list[OwnershipEvidence]] = {}
        for (server, name, _), evidence in self.evidence.items():
            seen.setdefault(ServerPath(server, name), []).append(evidence)
        owners: dict[ServerPath, uuid.UUID] = {}
        for path in set(paths) & seen.keys():
            # the latest; of equally late ones, the smallest device id
            latest = max(e.last_seen_at for e in seen[path])
            owners[path] = min(e.device_id for e in seen[path] if e.last_seen_at == latest)
        return owners


@dataclass(frozen=True)
class _Scan:
    """One stored report (immutable, like every row of the fakes)."""

    scan_id: uuid.UUID
    trigger: str
    status: str
    error_code: str | None
    created_at: datetime
    counts: Mapping[PathClass, int]  # empty: a failed scan
    candidates: tuple[tuple[ServerPath, uuid.UUID], ...]
    unowned: tuple[ServerPath, ...]
    server_counts: Mapping[str, Mapping[PathClass, int]]

    @functools.cached_property
    def candidate_paths(self) -> frozenset[ServerPath]:
        return frozenset(path for path, _ in self.candidates)


@dataclass(frozen=True)
class _Disposition:
    disposition: Disposition
    apply_id: uuid.UUID


RUNNING = ApplyEnd("running")


@dataclass(frozen=True)
class StoredApplyRun:
    """An `apply_runs` row: how it started, and how it ended once it did."""

    run: ApplyRun
    end: ApplyEnd = RUNNING


_COUNT_FIELDS = tuple(f"{cls}_count" for cls in PathClass)


class MemoryReportStore:
    def __init__(self, now: Clock | None = None) -> None:
        self.now = now or DatabaseClock()
        self.scans: Rows[uuid.UUID, _Scan] = Rows()
        self.runs: Rows[uuid.UUID, StoredApplyRun] = Rows()
        self.disposed: Rows[tuple[uuid.UUID, ServerPath], _Disposition] = Rows()

    def age(self, scan_id: uuid.UUID, by: timedelta) -> None:
        """Make the report `by` older (its expiry moves with it)."""
        scan = self.scans[scan_id]
        self.scans = self.scans.put(scan_id, replace(scan, created_at=scan.created_at - by))

    async def insert_complete(
        self, report: NewReport, classification: Classification, media_servers: tuple[str, ...]
    ) -> tuple[datetime, datetime]:
        scan = _Scan(
            report.scan_id,
            report.trigger,
            "complete",
            None,
            self.now(),
            classification.counts(),
            tuple(sorted(classification.owned_stale.items())),
            tuple(sorted(classification.unowned)),
            classification.counts_by_server(media_servers),
        )
        self._insert(scan)
        return scan.created_at, scan.created_at + REPORT_VALIDITY

    async def insert_failed(self, report: NewReport, error_code: str) -> datetime:
        scan = _Scan(report.scan_id, report.trigger, "failed", error_code, self.now(), {}, (), (), {})
        self._insert(scan)
        return scan.created_at

    def _insert(self, scan: _Scan) -> None:
        if scan.scan_id in self.scans:
            raise ValueError("a report with this scan id exists")
        self.scans = self.scans.put(scan.scan_id, scan)

    async def load(self, scan_id: uuid.UUID) -> StoredReport | None:
        scan = self.scans.get(scan_id)
        if scan is None:
            return None
        counted = {f"{cls}_count": n for cls, n in scan.counts.items()} or dict.fromkeys(_COUNT_FIELDS)
        return StoredReport(
            **{
                name: getattr(scan, name)
                for name in ("scan_id", "trigger", "status", "error_code", "created_at")
            },
            **counted,
            expires_at=scan.created_at + REPORT_VALIDITY,
            age_ms=await self.report_age_ms(scan_id),
            observed_total=sum(scan.counts.values()) if scan.counts else None,
            candidates=dict(scan.candidates),
            unowned=list(scan.unowned),
            server_totals={server: sum(c.values()) for server, c in sorted(scan.server_counts.items())},
        )

    async def report_age_ms(self, scan_id: uuid.UUID) -> int:
        return (self.now() - self.scans[scan_id].created_at) // _MS

    async def prune(self, *, older_than_hours: int, limit: int = 1000) -> int:
        cutoff = self.now() - timedelta(hours=older_than_hours)
        oldest = sorted((s for s in self.scans.values() if s.created_at < cutoff), key=lambda s: s.created_at)
        used = {stored.run.scan_id for stored in self.runs.values()}
        pruned = [s.scan_id for s in oldest[:limit] if s.scan_id not in used]
        self.scans = self.scans.without(pruned)
        return len(pruned)

    async def start_apply(self, run: ApplyRun) -> None:
        if run.scan_id not in self.scans:
            raise LookupError("an apply run needs its report")
        if run.apply_id not in self.runs:
            self.runs = self.runs.put(run.apply_id, StoredApplyRun(run))

    async def finish_apply(self, apply_id: uuid.UUID, end: ApplyEnd) -> None:
        stored = self.runs.get(apply_id)
        if stored is not None:
            counted = {str(outcome): end.counts.get(outcome, 0) for outcome in COUNTED_OUTCOMES}
            self.runs = self.runs.put(apply_id, replace(stored, end=replace(end, counts=counted)))

    async def dispositions(self, scan_id: uuid.UUID) -> dict[ServerPath, Disposition]:
        return {path: d.disposition for (scan, path), d in self.disposed.items() if scan == scan_id}

    async def record_disposition(self, disposition: PathDisposition) -> None:
        scan_id, path, apply_id = disposition.scan_id, disposition.path, disposition.apply_id
        # The guards PostgreSQL's constraints keep (a use case never meets them).
        if path not in self.scans[scan_id].candidate_paths or apply_id not in self.runs:
            raise LookupError("a disposition needs an owned_stale finding of its report and its apply run")
        if (disposition.outcome == Outcome.FAILED) != (disposition.error_code is not None):
            raise ValueError("a failed disposition, and only that, has an error code")
        stored = self.disposed.get((scan_id, path))
        if stored is not None and stored.disposition.final:
            return
        attempts = 1 if stored is None else stored.disposition.attempts + (stored.apply_id != apply_id)
        recorded = Disposition(path, disposition.outcome, disposition.error_code, attempts)
        self.disposed = self.disposed.put((scan_id, path), _Disposition(recorded, apply_id))

    async def totals(self) -> dict[str, int]:
        ends = [stored.end for stored in self.runs.values()]
        return {
            "blocked": sum(end.status == "blocked" for end in ends),
            "deleted": sum(end.counts.get(Outcome.DELETED, 0) for end in ends),
            "failed": sum(end.counts.get(Outcome.FAILED, 0) for end in ends),
        }

    async def last_complete_counts(self) -> dict[str, dict[str, int]] | None:
        complete = [s for s in self.scans.values() if s.status == "complete"]
        if not complete:
            return None
        newest = max(complete, key=lambda s: s.created_at)
        if not newest.server_counts:
            return None
        return {
            server: {"observed": sum(tally.values()), **{str(cls): n for cls, n in tally.items()}}
            for server, tally in newest.server_counts.items()
        }


class MemoryReportReader:
    """The read API's view of an `MemoryReportStore`."""

    def __init__(self, reports: MemoryReportStore) -> None:
        self._reports = reports

    def _newest_first(self) -> list[_Scan]:
        return sorted(self._reports.scans.values(), key=lambda s: (s.created_at, s.scan_id), reverse=True)

    async def page(self, limit: int, after: ReportPosition | None) -> list[ReportSummary]:
        scans = self._newest_first()
        if after is not None:
            scans = [s for s in scans if (s.created_at, s.scan_id) < (after.created_at, after.scan_id)]
        reports = [await self._reports.load(scan.scan_id) for scan in scans[:limit]]
        return [report.summary() for report in reports if report is not None]

    async def latest_complete(self) -> uuid.UUID | None:
        return next((s.scan_id for s in self._newest_first() if s.status == "complete"), None)

    async def load(self, scan_id: uuid.UUID) -> StoredReport | None:
        return await self._reports.load(scan_id)


class MemoryScanLease:
    def __init__(self, now: Clock | None = None) -> None:
        self.now = now or DatabaseClock()
        self.next_scan_at: datetime | None = None  # None: due from the start (-infinity)
        self.lease: Lease | None = None

    def expire(self) -> None:
        """Let the current lease run out (as a paused holder's would)."""
        if self.lease is not None:
            self.lease = replace(self.lease, expires_at=self.now() - timedelta(seconds=1))

    async def claim(self, owner: str, *, lease_seconds: float, due_only: bool) -> Lease | None:
        now = self.now()
        if due_only and self.next_scan_at is not None and self.next_scan_at > now:
            return None
        if self.lease is not None and self.lease.expires_at > now:
            return None
        self.lease = Lease(owner, uuid.uuid4(), now + timedelta(seconds=lease_seconds))
        return self.lease

    async def release(self, lease: Lease, *, next_scan_in_seconds: float) -> None:
        now = self.now()
        current = self.lease
        if current is None or (current.owner, current.token) != (lease.owner, lease.token):
            raise LeaseLost()
        if current.expires_at <= now:
            raise LeaseLost()
        self.lease = None
        self.next_scan_at = now + timedelta(seconds=next_scan_in_seconds)


class MemoryOrphanUnitOfWork(MemoryUnitOfWork):
    """The fake unit of work; one instance is the whole database (`lambda: uow` is its factory), its
    `clock` the database's."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = DatabaseClock()
        self.reports = MemoryReportStore(self.clock)
        self.projection = MemoryProjectionStore()
        self.scan_lease = MemoryScanLease(self.clock)

    def stores(self) -> Sequence[object]:
        return (self.reports, self.projection, self.scan_lease)

    async def __aenter__(self) -> Self:
        self.clock.advance(TRANSACTION_TICK)
        return await super().__aenter__()


class MemoryApplyLock:
    def __init__(self) -> None:
        self.held = False

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        if self.held:
            raise ApplyInProgress()
        self.held = True
        try:
            yield
        finally:
            self.held = False


class MemoryMediaMtxPaths:
    """One MediaMTX server's paths (a fleet of them: the platform's `MediaFleet` holding these).
    `unreachable`: every call fails `mediamtx_unreachable`; a delete of a
    name in `refuse_deletes` fails `mediamtx_http_500`; `delete_requests` lists every DELETE sent."""

    def __init__(self, names: Iterable[str] = (), *, deadline_seconds: float = 5.0) -> None:
        self.paths: set[str] = set(names)
        self.deadline_seconds = deadline_seconds
        self.unreachable = False
        self.refuse_deletes: set[str] = set()
        self.delete_requests: list[str] = []

    async def list_path_names(self) -> list[str]:
        if self.unreachable:
            raise MediaMtxError("mediamtx_unreachable")
        return sorted(self.paths)

    async def delete_path(self, name: str) -> bool:
        if not is_managed_path_name(name):
            raise MediaMtxError("mediamtx_unmanaged_name")
        if self.unreachable:
            raise MediaMtxError("mediamtx_unreachable")
        self.delete_requests.append(name)
        if name in self.refuse_deletes:
            raise MediaMtxError("mediamtx_http_500")
        existed = name in self.paths
        self.paths.discard(name)
        return existed


class MemoryProjectionProgress:
    """`published` messages on the topics, `applied` of them by the projection; `unavailable`: Kafka cannot
    tell. `wait` polls, so a test may apply while an apply waits."""

    POLL_SECONDS = 0.001

    def __init__(self) -> None:
        self.published = 0
        self.applied = 0
        self.unavailable = False

    async def wait(self, timeout_seconds: float) -> BlockReason | None:
        if self.unavailable:
            return BlockReason.PROJECTION_UNAVAILABLE
        target = self.published
        deadline = time.monotonic() + timeout_seconds
        while self.applied < target:
            if time.monotonic() >= deadline:
                return BlockReason.PROJECTION_LAGGING
            await asyncio.sleep(self.POLL_SECONDS)
        return None

    async def lag(self) -> int | None:
        return None if self.unavailable else max(0, self.published - self.applied)
