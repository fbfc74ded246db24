"""The records orphan-scanner keeps: the projection's claims and ownership evidence, scan reports and their
per-path dispositions. Plain values, no I/O; the stores (`service_layer.ports`) keep and return them."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime

from orphan_scanner.domain.classify import ServerPath


@dataclass(frozen=True)
class DeviceClaim:
    """A Sense device's current state; `media_server_id` None: an event from before several servers."""

    device_id: uuid.UUID
    tenant_id: str
    site_id: str
    path_name: str
    media_server_id: str | None
    desired_state: str
    config_version: int
    event_id: uuid.UUID
    occurred_at: datetime


@dataclass(frozen=True)
class OwnershipEvidence:
    """Sense configured `path_name` on `media_server_id` for `device_id` (first and last seen)."""

    path_name: str
    media_server_id: str
    device_id: uuid.UUID
    tenant_id: str
    site_id: str
    first_seen_at: datetime
    last_seen_at: datetime


class Outcome(enum.StrEnum):
    """What an apply did with one candidate (a disposition)."""

    ATTEMPTING = "attempting"
    DELETED = "deleted"
    ALREADY_ABSENT = "already_absent"
    FAILED = "failed"
    SKIPPED_NOT_STALE = "skipped_not_stale"


# Never rewritten once recorded (the database refuses it).
FINAL_OUTCOMES = frozenset({Outcome.DELETED, Outcome.ALREADY_ABSENT})
# The outcomes an apply run counts (`attempting` is in flight, not an outcome), in the runs' column order.
COUNTED_OUTCOMES = (Outcome.DELETED, Outcome.ALREADY_ABSENT, Outcome.SKIPPED_NOT_STALE, Outcome.FAILED)


@dataclass(frozen=True)
class NewReport:
    """Who is writing which report: the scan's id, its trigger, the instance and its lease's token."""

    scan_id: uuid.UUID
    trigger: str
    instance_id: str
    lease_token: uuid.UUID


@dataclass(frozen=True)
class ReportHead:
    """What every view of a report starts with (the read API's summaries too): the scan, its trigger, how
    it ended, when it was made and when it stops being usable for apply."""

    scan_id: uuid.UUID
    trigger: str
    status: str
    error_code: str | None
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class ReportSummary(ReportHead):
    observed_total: int | None
    owned_stale_count: int | None
    unowned_count: int | None


@dataclass(frozen=True)
class StoredReport(ReportSummary):
    age_ms: int
    in_use_count: int | None
    # owned_stale (server, path) -> last owning device, ordered by (server, path)
    candidates: dict[ServerPath, uuid.UUID]
    # ordered by (server, path)
    unowned: list[ServerPath]
    # configured paths per MediaMTX server at the scan (complete reports), ordered by server
    server_totals: dict[str, int]

    def summary(self) -> ReportSummary:
        return ReportSummary(**{f.name: getattr(self, f.name) for f in fields(ReportSummary)})


@dataclass(frozen=True)
class Disposition:
    path: ServerPath
    outcome: str
    error_code: str | None
    attempts: int

    @property
    def final(self) -> bool:
        return self.outcome in FINAL_OUTCOMES


@dataclass(frozen=True)
class ApplyRun:
    """An apply of a report, as it starts."""

    apply_id: uuid.UUID
    scan_id: uuid.UUID
    actor: str
    instance_id: str
    report_candidates: int


@dataclass(frozen=True)
class ApplyEnd:
    """How an apply run ended: `completed`, `partial` or `blocked` (with its reason), counts per outcome."""

    status: str
    reason_code: str | None = None
    current_total: int | None = None
    current_candidates: int | None = None
    counts: Mapping[str, int] = field(default_factory=dict)
    blocked_media_server_id: str | None = None


@dataclass(frozen=True)
class PathDisposition:
    """What an apply run did with one candidate of its report."""

    scan_id: uuid.UUID
    apply_id: uuid.UUID
    actor: str
    path: ServerPath
    outcome: str
    error_code: str | None = None


@dataclass(frozen=True)
class ReportPosition:
    """Where a page of the report list (newest first by (created_at, scan_id)) ends."""

    created_at: datetime
    scan_id: uuid.UUID
