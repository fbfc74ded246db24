"""What the stores hold, as the service layer sees it: a stored watcher and one row of its check log."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from signal_watcher.domain.model import Status, WatcherSpec

__all__ = ["CheckRow", "Position", "WatcherAfterCheck", "WatcherRecord"]

Position = tuple[datetime, uuid.UUID]  # a keyset position: (created_at or checked_at, id)


@dataclass(frozen=True)
class WatcherRecord:
    id: uuid.UUID
    user_id: str
    spec: WatcherSpec
    status: Status
    last_value_hash: str | None
    last_value_excerpt: str | None
    last_checked_at: datetime | None
    last_changed_at: datetime | None
    consecutive_failures: int
    next_check_at: datetime
    created_at: datetime
    updated_at: datetime
    # set (a stable code) when the secrets could not be decrypted; headers and body are then empty
    secrets_error: str | None = None


@dataclass(frozen=True)
class CheckRow:
    id: uuid.UUID
    watcher_id: uuid.UUID
    checked_at: datetime
    http_status: int | None
    value_hash: str | None
    changed: bool
    trigger_id: uuid.UUID | None
    error_code: str | None
    duration_ms: int | None
    warning: str | None


@dataclass(frozen=True)
class WatcherAfterCheck:
    """What one check writes to its watcher."""

    checked_at: datetime
    status: Status
    consecutive_failures: int
    next_check_at: datetime
    last_value_hash: str | None  # the baseline from now on
    last_value_excerpt: str | None
    changed: bool  # the judged value changed: `last_changed_at` becomes `checked_at`
