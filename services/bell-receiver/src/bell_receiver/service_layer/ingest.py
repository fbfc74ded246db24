"""Kafka ingest: other services' audit and notification events into the audit trail and the inbox.

Runs as the handler of the platform's IdempotentConsumer, inside its transaction (processed_events row,
partition position and our writes commit together). The audit row is keyed by the envelope's
``(source_system, event_id)``, so an event that already reached Bell by the signed HTTP relay (Sense's
DeviceAuditRecorded) is recognised: same canonical digest = already stored, other digest =
``id_conflict`` (dead-lettered by the consumer).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bell_receiver.adapters.audit_trail import AppendOutcome, AuditRow, AuditTrail, Channel
from bell_receiver.adapters.inbox import Inbox
from bell_receiver.service_layer.metrics import BellMetrics, IngestOutcome
from bell_receiver.service_layer.relay import fact_row
from yovision_platform.audit_relay.facts import (
    EVENT_TYPE,
    RejectedItem,
    canonical_timestamp,
    digest_of,
    fact_from_audit_event,
)
from yovision_platform.consumer import EventRejected, InboundEvent
from yovision_platform.db import DbConnection, Identifier
from yovision_platform.events import EventCatalog

CONSUMER_GROUP = "bell-receiver-audit"

WATCHER_DISABLED = "WatcherDisabled"
NOTIFICATION_KIND_WATCHER_DISABLED = "WATCHER_DISABLED"
GENERIC_AUDIT_EVENT_TYPES = frozenset(
    {
        "ScanReported",
        "PathDisposed",
        "ApplyBlocked",
        "MaterialUploaded",
        "TranscodeStarted",
        "TranscodeCompleted",
        "TranscodeFailed",
        WATCHER_DISABLED,
    }
)
# Every event type Bell ingests; the topics it reads are the catalogue's topics of these. WatcherTriggered
# (signal.trigger.v1) is deliberately absent: it carries agent-run requests with rendered prompts, not audit.
INGESTED_EVENT_TYPES = GENERIC_AUDIT_EVENT_TYPES | {EVENT_TYPE}


def audit_topics(catalog: EventCatalog) -> tuple[str, ...]:
    """The logical topics carrying the event types Bell ingests."""
    return catalog.topics_of(INGESTED_EVENT_TYPES)


# Which record field names the actor / device of a generic event, where it has one.
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
    """An audit row for a non-Sense event: its fields (without the envelope) plus type, time, aggregate."""
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


class EventIngest:
    def __init__(self, schema: Identifier, metrics: BellMetrics) -> None:
        self._trail = AuditTrail(schema)
        self._inbox = Inbox(schema)
        self._metrics = metrics

    def _reject(self, outcome: IngestOutcome) -> EventRejected:
        self._metrics.ingest_events.labels(outcome=outcome).inc()
        return EventRejected(outcome.value)

    async def handle(self, conn: DbConnection, event: InboundEvent) -> None:
        row = self._row_for(event)
        [result] = await self._trail.append(conn, [row], Channel.KAFKA)
        if result.outcome is AppendOutcome.OTHER_DIGEST:
            raise self._reject(IngestOutcome.ID_CONFLICT)
        if event.event_type == WATCHER_DISABLED:
            await self._notify_watcher_disabled(conn, event)
        stored = result.outcome is AppendOutcome.INSERTED
        self._metrics.ingest_events.labels(
            outcome=IngestOutcome.STORED if stored else IngestOutcome.ALREADY_STORED
        ).inc()

    def _row_for(self, event: InboundEvent) -> AuditRow:
        if event.event_type == EVENT_TYPE:
            checked = fact_from_audit_event(event.record)
            if isinstance(checked, RejectedItem):
                raise self._reject(IngestOutcome.INVALID_FACT)
            row = fact_row(checked)
            if row.source_system != event.source_system:
                raise self._reject(IngestOutcome.INVALID_FACT)
            return row
        if event.event_type in GENERIC_AUDIT_EVENT_TYPES:
            return generic_row(event)
        raise self._reject(IngestOutcome.UNSUPPORTED_EVENT_TYPE)

    async def _notify_watcher_disabled(self, conn: DbConnection, event: InboundEvent) -> None:
        record = event.record
        await self._inbox.add(
            conn,
            user_id=record["user_id"],
            kind=NOTIFICATION_KIND_WATCHER_DISABLED,
            source_system=event.source_system,
            event_id=event.event_id,
            occurred_at=record["envelope"]["occurred_at"],
            data={
                "watcher_id": record["watcher_id"],
                "watcher_name": record["watcher_name"],
                "consecutive_failures": record["consecutive_failures"],
                "last_error_code": record["last_error_code"],
            },
        )
