"""Material states and the transitions between them."""

from __future__ import annotations

import enum
from datetime import datetime

from media_worker.domain.limits import PROTECTION_WINDOW

__all__ = ["MaterialStatus", "can_transition", "protection_until", "source_exposable"]


class MaterialStatus(enum.StrEnum):
    PENDING = "pending"
    PROCESSING = "processing"
    DONE = "done"
    FAILED = "failed"


_ALLOWED: dict[MaterialStatus, frozenset[MaterialStatus]] = {
    # processing -> pending: a lease was released (drain, stop) before the job finished.
    MaterialStatus.PENDING: frozenset({MaterialStatus.PROCESSING}),
    MaterialStatus.PROCESSING: frozenset(
        {MaterialStatus.PENDING, MaterialStatus.PROCESSING, MaterialStatus.DONE, MaterialStatus.FAILED}
    ),
    MaterialStatus.FAILED: frozenset({MaterialStatus.PENDING}),  # retry
    MaterialStatus.DONE: frozenset(),
}


def can_transition(current: MaterialStatus, target: MaterialStatus) -> bool:
    return target in _ALLOWED[current]


def protection_until(created_at: datetime) -> datetime:
    return created_at + PROTECTION_WINDOW


def source_exposable(created_at: datetime, now: datetime) -> bool:
    """The source location may appear in an API response only after the protection window."""
    return now >= protection_until(created_at)
