"""Kafka ingest: other services' audit and notification events into the audit trail and the inbox.

Runs as the handler of the platform's IdempotentConsumer, in a unit of work the consumer's transaction
holds (its processed_events row, the partition position and our writes commit together). The audit row is
keyed by the envelope's ``(source_system, event_id)``, so an event that already reached Bell by the signed
push (Sense's DeviceAuditRecorded) is recognised: same canonical digest = already stored, other digest =
``id_conflict`` (dead-lettered by the consumer).
"""

from __future__ import annotations

from dataclasses import replace

from bell_receiver.domain.audit import AppendOutcome, AuditRow, Channel, fact_row, generic_row
from bell_receiver.domain.inbox import KIND_WATCHER_DISABLED, NewNotification
from bell_receiver.service_layer.metrics import BellMetrics, IngestOutcome
from bell_receiver.service_layer.ports import BellUnitOfWork
from yovision_platform.audit_push import EVENT_TYPE, RejectedItem, fact_from_audit_event
from yovision_platform.messaging import EventCatalog, EventRejected, InboundEvent

CONSUMER_GROUP = "bell-receiver-audit"

WATCHER_DISABLED = "WatcherDisabled"
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


def watcher_disabled_notification(event: InboundEvent) -> NewNotification:
    record = event.record
    return NewNotification(
        user_id=record["user_id"],
        kind=KIND_WATCHER_DISABLED,
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


class EventIngester:
    def __init__(self, metrics: BellMetrics) -> None:
        self._metrics = metrics

    def _reject(self, outcome: IngestOutcome) -> EventRejected:
        self._metrics.ingest_events.labels(outcome=outcome).inc()
        return EventRejected(outcome.value)

    async def handle(self, uow: BellUnitOfWork, event: InboundEvent) -> None:
        """Store one new event in `uow` (the consumer's transaction), with the trace it came in;
        `EventRejected` writes nothing."""
        row = replace(self._row_for(event), trace_id=event.trace_id)
        async with uow:
            [result] = await uow.audit_trail.append([row], Channel.KAFKA)
            if result.outcome is AppendOutcome.OTHER_DIGEST:
                raise self._reject(IngestOutcome.ID_CONFLICT)
            if event.event_type == WATCHER_DISABLED:
                await uow.inbox.add(watcher_disabled_notification(event))
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
