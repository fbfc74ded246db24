"""The records orphan-scanner keeps: the projection's claims and ownership evidence, scan reports and their
per-path dispositions. Plain values, no I/O; the stores (`service_layer.ports`) keep and return them."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
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


@dataclass(frozen=True)
class StoredReport:
    scan_id: uuid.UUID
    trigger: str
    status: str
    error_code: str | None
    created_at: datetime
    expires_at: datetime
    age_ms: int
    observed_total: int | None
    in_use_count: int | None
    owned_stale_count: int | None
    unowned_count: int | None
    # owned_stale (server, path) -> last owning device, ordered by (server, path)
    candidates: dict[ServerPath, uuid.UUID]
    # ordered by (server, path)
    unowned: list[ServerPath]
    # configured paths per MediaMTX server at the scan (complete reports), ordered by server
    server_totals: dict[str, int]


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
class ReportSummary:
    scan_id: uuid.UUID
    trigger: str
    status: str
    error_code: str | None
    created_at: datetime
    expires_at: datetime
    observed_total: int | None
    owned_stale_count: int | None
    unowned_count: int | None


@dataclass(frozen=True)
class ReportPosition:
    """Where a page of the report list (newest first by (created_at, scan_id)) ends."""

    created_at: datetime
    scan_id: uuid.UUID
