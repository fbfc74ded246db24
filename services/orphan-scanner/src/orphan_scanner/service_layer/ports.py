"""The ports orphan-scanner's use cases take. Each has a PostgreSQL, Kafka or HTTP adapter in `adapters/` (or
the platform's MediaMTX client) and an in-memory fake in `adapters/memory.py`, proven equal by one contract
suite per port (`tests/ports/orphan_scanner/`). `PathFleet` is the platform's `MediaFleet` in both
cases, holding real clients or fakes.

A use case writes through a unit of work (`OrphanUnitOfWork`: the stores and the outbox in one
transaction) made by a `UnitOfWorkFactory`; it reads MediaMTX through `PathFleet`, asks
`ProjectionProgress` whether the projection has caught up with Kafka, and runs apply under `ApplyLock`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Protocol

from orphan_scanner.domain import records
from orphan_scanner.domain.classify import Classification, ServerPath
from orphan_scanner.domain.gate import BlockReason
from yovision_platform.storage import Lease, UnitOfWork

__all__ = [
    "ApplyLock",
    "MediaMtxPaths",
    "OrphanUnitOfWork",
    "PathFleet",
    "ProjectionProgress",
    "ProjectionStore",
    "ReportReader",
    "ReportStore",
    "ScanLease",
    "UnitOfWorkFactory",
]


class ProjectionStore(Protocol):
    """Sense's device claims and path-ownership evidence, per MediaMTX server."""

    async def apply_claim(self, claim: records.DeviceClaim) -> None:
        """Upsert the device's claim; a claim with an older `config_version` than the stored one changes
        nothing (an equal one replaces it)."""
        ...

    async def record_ownership(self, evidence: records.OwnershipEvidence) -> None:
        """Upsert per (server, path, device): `first_seen_at` only moves earlier, `last_seen_at` later."""
        ...

    async def claimed_paths(self, paths: Iterable[ServerPath]) -> set[ServerPath]:
        """The pairs among `paths` that an enabled device declares: on that server, or on every server when
        the claim has no server."""
        ...

    async def last_owners(self, paths: Iterable[ServerPath]) -> dict[ServerPath, uuid.UUID]:
        """For each pair among `paths` with evidence on that server: the device seen there last (ties: the
        smallest device id)."""
        ...


class ReportStore(Protocol):
    """Scan reports with their findings and per-server counts, apply runs and per-path dispositions. Times
    are the store's clock (the database's)."""

    async def insert_complete(
        self, report: records.NewReport, classification: Classification, media_servers: tuple[str, ...]
    ) -> tuple[datetime, datetime]:
        """A usable report, its findings and counts for every one of `media_servers` (and any server with a
        path); returns (created_at, expires_at = created_at + 15 min)."""
        ...

    async def insert_failed(self, report: records.NewReport, error_code: str) -> datetime: ...

    async def load(self, scan_id: uuid.UUID) -> records.StoredReport | None: ...

    async def report_age_ms(self, scan_id: uuid.UUID) -> int:
        """The report's age now, in whole milliseconds."""
        ...

    async def prune(self, *, older_than_hours: int, limit: int = 1000) -> int:
        """Delete up to `limit` reports older than that which no apply used; returns how many."""
        ...

    async def start_apply(self, run: records.ApplyRun) -> None:
        """The apply run, `running`; a second start of the same id changes nothing."""
        ...

    async def finish_apply(self, apply_id: uuid.UUID, end: records.ApplyEnd) -> None: ...

    async def dispositions(self, scan_id: uuid.UUID) -> dict[ServerPath, records.Disposition]: ...

    async def record_disposition(self, disposition: records.PathDisposition) -> None:
        """Insert or replace the path's disposition, except a final one (kept as it is). `attempts` counts
        the apply runs that recorded it."""
        ...

    async def totals(self) -> dict[str, int]:
        """Over every apply run: `blocked` runs, `deleted` paths, `failed` deletes."""
        ...

    async def last_complete_counts(self) -> dict[str, dict[str, int]] | None:
        """Per server, `observed`/`in_use`/`owned_stale`/`unowned` of the newest usable report."""
        ...


class ScanLease(Protocol):
    """The scan singleton: one fenced lease with the next periodic scan's due time (the store's clock)."""

    async def claim(self, owner: str, *, lease_seconds: float, due_only: bool) -> Lease | None:
        """The lease when it is free (and, `due_only`, the next scan is due); else None."""
        ...

    async def release(self, lease: Lease, *, next_scan_in_seconds: float) -> None:
        """Fenced: release the lease and set the next scan's due time, or raise `LeaseLost` when `lease`
        is no longer current (expired or taken over)."""
        ...


class OrphanUnitOfWork(UnitOfWork, Protocol):
    """One transaction over the stores and the outbox (read-only members, so that each adapter may bind
    its own store types)."""

    @property
    def reports(self) -> ReportStore: ...

    @property
    def projection(self) -> ProjectionStore: ...

    @property
    def scan_lease(self) -> ScanLease: ...


UnitOfWorkFactory = Callable[[], OrphanUnitOfWork]


class ReportReader(Protocol):
    """The read API's view of the reports."""

    async def page(self, limit: int, after: records.ReportPosition | None) -> list[records.ReportSummary]:
        """Up to `limit` reports, newest first by (created_at, scan_id), after `after`."""
        ...

    async def latest_complete(self) -> uuid.UUID | None: ...

    async def load(self, scan_id: uuid.UUID) -> records.StoredReport | None: ...


class ApplyLock(Protocol):
    def hold(self) -> AbstractAsyncContextManager[None]:
        """Held for a whole apply; raises `ApplyInProgress` at once while another apply holds it."""
        ...


class MediaMtxPaths(Protocol):
    """One MediaMTX server's configured paths (`yovision_platform.mediamtx.MediaMtxApi`). Failures raise
    `MediaMtxError` with a stable code."""

    @property
    def deadline_seconds(self) -> float: ...

    async def list_path_names(self) -> list[str]:
        """Every configured name, sorted, unique (hand-made ones included)."""
        ...

    async def delete_path(self, name: str) -> bool:
        """Delete exactly `name`: True when it existed, False when it was already gone. A name that is not
        managed raises `mediamtx_unmanaged_name` before anything is sent."""
        ...


class PathFleet(Protocol):
    """The registered MediaMTX servers as this service uses them: each server's configured paths, listed and
    deleted (`MediaMtxPaths`). The adapter is the platform's `yovision_platform.mediamtx.MediaFleet`;
    Sense's port of that fleet (`MediaServerFleet`) asks more of each server."""

    @property
    def ids(self) -> tuple[str, ...]:
        """Sorted."""
        ...

    @property
    def deadline_seconds(self) -> float: ...

    def client(self, server_id: str) -> MediaMtxPaths:
        """Raises `MediaMtxError(media_server_not_registered)` for an id that is not registered."""
        ...

    async def aclose(self) -> None: ...


class ProjectionProgress(Protocol):
    """How far the projection is behind what Sense published on Kafka."""

    async def wait(self, timeout_seconds: float) -> BlockReason | None:
        """None once the projection has applied everything published before the call; else
        `projection_lagging` (not within the timeout) or `projection_unavailable` (Kafka cannot tell)."""
        ...

    async def lag(self) -> int | None:
        """Messages published but not yet applied; None when Kafka cannot tell."""
        ...
