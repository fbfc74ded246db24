"""Audit rows for the suites here and the use-case tests (tests/unit/bell_receiver)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from bell_receiver.domain.audit import AuditRow
from yovision_platform.audit_push import digest_of

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def audit_row(
    n: int = 0,
    *,
    source: str = "sense",
    event_type: str = "DeviceAuditRecorded",
    device: str | None = None,
    event_id: uuid.UUID | None = None,
    second: int | None = None,
) -> AuditRow:
    """Row `n`: fact ``{"n": n, ...}``, actor ``actor-<n % 2>``, occurred at T0 + `second` (default `n`) s."""
    document = {"n": n, "changed_fields": ["source_uri"]}
    return AuditRow(
        source_system=source,
        event_id=event_id or uuid.uuid4(),
        event_type=event_type,
        action=f"{source}.action",
        actor=f"actor-{n % 2}",
        tenant_id="tenant-a" if source == "sense" else None,
        site_id=None,
        device_id=device,
        occurred_at=T0 + timedelta(seconds=n if second is None else second),
        payload=document,
        digest=digest_of(document),
    )
