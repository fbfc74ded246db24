"""The audit trail's rows: what is appended (from a Sense fact or another service's event) and what is read.

A row is keyed by ``(source_system, event_id)`` and carries the canonical document and its digest, so the
same fact arriving twice (by the signed push and by Kafka) is recognised: same digest = already stored,
other digest = a conflict.
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from yovision_platform.audit_push import EVENT_TYPE, SOURCE_SYSTEM, ValidFact, canonical_timestamp, digest_of
from yovision_platform.messaging import InboundEvent


class Channel(enum.StrEnum):
    """How a row reached Bell (column ``channel``)."""

    HTTP_RELAY = "http_relay"
    KAFKA = "kafka"


class AppendOutcome(enum.StrEnum):
    INSERTED = "inserted"
    SAME_DIGEST = "same_digest"
    OTHER_DIGEST = "other_digest"


@dataclass(frozen=True)
class AppendResult:
    outcome: AppendOutcome
    stored_digest: bytes


@dataclass(frozen=True)
class AuditRow:
    source_system: str
    event_id: uuid.UUID
    event_type: str
    action: str
    actor: str | None
    tenant_id: str | None
    site_id: str | None
    device_id: str | None
    occurred_at: datetime
    payload: Mapping[str, Any]
    digest: bytes
    # The trace the row was stored in (not part of the fact: the digest ignores it).
    trace_id: str | None = field(default=None, kw_only=True)


def check_appendable(rows: Sequence[AuditRow]) -> None:
    """The precondition of `append` (both adapters): one source system, distinct event ids."""
    if len({row.source_system for row in rows}) > 1:
        raise ValueError("append takes rows of one source_system")
    if len({row.event_id for row in rows}) != len(rows):
        raise ValueError("append takes rows with distinct event ids")


@dataclass(frozen=True)
class StoredAuditEvent(AuditRow):
    """An appended row as the trail keeps it: plus its id, arrival time (database clock) and channel."""

    id: int
    received_at: datetime
    channel: Channel


@dataclass(frozen=True)
class AuditFilter:
    """The read API's filters; each is optional. The time range is ``[occurred_from, occurred_before)``."""

    source_system: str | None = None
    event_type: str | None = None
    device_id: str | None = None
    actor: str | None = None
    occurred_from: datetime | None = None
    occurred_before: datetime | None = None

    @property
    def empty_range(self) -> bool:
        return (
            self.occurred_from is not None
            and self.occurred_before is not None
            and self.occurred_from >= self.occurred_before
        )


def fact_row(valid: ValidFact) -> AuditRow:
    """The row of a validated Sense device-audit fact (either channel)."""
    fact = valid.fact
    return AuditRow(
        source_system=SOURCE_SYSTEM,
        event_id=fact.event_id,
        event_type=EVENT_TYPE,
        action=fact.action,
        actor=fact.actor,
        tenant_id=fact.tenant_id,
        site_id=fact.site_id,
        device_id=fact.device_id,
        occurred_at=fact.occurred_at,
        payload=valid.document,
        digest=valid.digest,
    )


# Which record field names the actor of a generic event, where it has one.
_ACTOR_FIELDS = ("actor", "uploaded_by", "user_id")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def json_safe(value: Any) -> Any:
    if isinstance(value, datetime):
        return canonical_timestamp(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def generic_row(event: InboundEvent) -> AuditRow:
    """The row of a non-Sense event: its fields (without the envelope) plus type, time, aggregate."""
    envelope = event.record["envelope"]
    fields = {k: v for k, v in event.record.items() if k != "envelope"}
    document: dict[str, Any] = {
        "event_type": event.event_type,
        "occurred_at": json_safe(envelope["occurred_at"]),
        "aggregate_id": envelope["aggregate_id"],
        **json_safe(fields),
    }
    actor = next((fields[f] for f in _ACTOR_FIELDS if isinstance(fields.get(f), str)), None)
    device = fields.get("device_id")
    return AuditRow(
        source_system=event.source_system,
        event_id=event.event_id,
        event_type=event.event_type,
        action=f"{event.source_system}.{_snake(event.event_type)}",
        actor=actor,
        tenant_id=None,
        site_id=None,
        device_id=device if isinstance(device, str) else None,
        occurred_at=envelope["occurred_at"],
        payload=document,
        digest=digest_of(document),
    )
