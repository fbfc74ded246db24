"""The per-user notification inbox: what an ingested event adds, and a row as the user reads it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

KIND_WATCHER_DISABLED = "WATCHER_DISABLED"


@dataclass(frozen=True)
class NewNotification:
    """One inbox entry; unique per ``(source_system, event_id)`` (a redelivered event adds nothing)."""

    user_id: str
    kind: str
    source_system: str
    event_id: uuid.UUID
    occurred_at: datetime
    data: Mapping[str, Any]


@dataclass(frozen=True)
class NotificationRow(NewNotification):
    """An entry as the inbox keeps it: plus its id and when the user marked it read (None: unread)."""

    id: int
    read_at: datetime | None = None
