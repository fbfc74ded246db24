"""The audit push to Bell (contract ``sense-audit-relay-v1``): its limits and its validated configuration.

The settings (``SENSE_AUDIT_PUSH_ENABLED``, ``SENSE_BELL_URL``, ``SENSE_BELL_KEY_FILE``,
``SENSE_BELL_KEY_ID``) are read and checked by `sense_reconciler.settings`, which builds the
`AuditPushConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yovision_platform.audit_push import MAX_BATCH_ITEMS
from yovision_platform.security import KeyRing

__all__ = [
    "BACKOFF_BASE_SECONDS",
    "BACKOFF_CAP_SECONDS",
    "BATCH_MAX_ITEMS",
    "LEASE_SECONDS",
    "POLL_INTERVAL_SECONDS",
    "REQUEST_DEADLINE_SECONDS",
    "AuditPushConfig",
]

BATCH_MAX_ITEMS = MAX_BATCH_ITEMS
LEASE_SECONDS = 30.0  # DB-clock lease on the fact cursor
REQUEST_DEADLINE_SECONDS = 10.0  # whole HTTP exchange; must stay shorter than the lease
BACKOFF_BASE_SECONDS = 1.0  # first retry of a failed batch
BACKOFF_CAP_SECONDS = 300.0  # retries never wait longer
POLL_INTERVAL_SECONDS = 0.5  # idle wait when nothing is due


@dataclass(frozen=True)
class AuditPushConfig:
    """A validated push configuration. Tests shorten ``lease_seconds`` and ``request_deadline_seconds``."""

    bell_url: str
    keyring: KeyRing = field(repr=False)
    batch_size: int = BATCH_MAX_ITEMS
    lease_seconds: float = LEASE_SECONDS
    request_deadline_seconds: float = REQUEST_DEADLINE_SECONDS
    backoff_base_seconds: float = BACKOFF_BASE_SECONDS
    backoff_cap_seconds: float = BACKOFF_CAP_SECONDS
    poll_interval_seconds: float = POLL_INTERVAL_SECONDS

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= BATCH_MAX_ITEMS:
            raise ValueError(f"batch_size must be within 1..{BATCH_MAX_ITEMS}")
        if self.request_deadline_seconds <= 0 or self.request_deadline_seconds >= self.lease_seconds:
            raise ValueError("request_deadline_seconds must be positive and shorter than lease_seconds")
        if not 0 < self.backoff_base_seconds <= self.backoff_cap_seconds:
            raise ValueError("backoff needs 0 < base <= cap")
        if self.poll_interval_seconds <= 0:
            raise ValueError("poll_interval_seconds must be positive")
