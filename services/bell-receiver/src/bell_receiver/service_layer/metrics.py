"""bell-receiver's Prometheus metrics. Every label comes from a fixed enum
(yovision_platform.observability)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram

from yovision_platform.audit_push import BatchErrorCode, ItemRejectCode, ItemStatus
from yovision_platform.errors import SignatureRejectReason
from yovision_platform.observability import LabeledMetric, labeled_counter, labeled_histogram


class RequestOutcome(enum.StrEnum):
    """How one signed batch request ended (label ``outcome`` of ``bell_audit_push_requests_total``)."""

    PROCESSED = "processed"
    INVALID_BATCH = "invalid_batch"
    REPLAYED = "replayed"
    REPLAY_CONFLICT = "replay_conflict"
    UNAUTHORIZED = "unauthorized"
    BODY_TOO_LARGE = "body_too_large"
    REQUEST_TIMEOUT = "request_timeout"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    UNAVAILABLE = "unavailable"

    @classmethod
    def of_refusal(cls, code: BatchErrorCode) -> RequestOutcome:
        """A whole-request refusal's outcome: its own code, or ``invalid_batch`` for a body that is not a
        batch (``invalid_json``, ``invalid_envelope``, ``batch_size_out_of_range``)."""
        try:
            return cls(code.value)
        except ValueError:
            return cls.INVALID_BATCH


class IngestOutcome(enum.StrEnum):
    """What the Kafka ingest did with one new event (label ``outcome`` of ``bell_ingest_events_total``)."""

    STORED = "stored"
    ALREADY_STORED = "already_stored"
    ID_CONFLICT = "id_conflict"
    INVALID_FACT = "invalid_fact"
    UNSUPPORTED_EVENT_TYPE = "unsupported_event_type"


@dataclass(frozen=True)
class BellMetrics:
    requests: LabeledMetric[Counter]
    request_seconds: LabeledMetric[Histogram]
    item_results: LabeledMetric[Counter]
    item_rejections: LabeledMetric[Counter]
    signature_rejections: LabeledMetric[Counter]
    ingest_events: LabeledMetric[Counter]

    @classmethod
    def create(cls, registry: CollectorRegistry) -> BellMetrics:
        metrics = cls(
            requests=labeled_counter(
                registry,
                "bell_audit_push_requests_total",
                "Audit push requests by outcome.",
                {"outcome": RequestOutcome},
                former_name="bell_relay_requests_total",
            ),
            request_seconds=labeled_histogram(
                registry,
                "bell_audit_push_request_seconds",
                "Audit push request handling time.",
                {},
                former_name="bell_relay_request_seconds",
            ),
            item_results=labeled_counter(
                registry,
                "bell_audit_push_item_results_total",
                "Audit push batch items by result.",
                {"outcome": ItemStatus},
                former_name="bell_relay_item_results_total",
            ),
            item_rejections=labeled_counter(
                registry,
                "bell_audit_push_item_rejections_total",
                "Rejected audit push batch items by stable code.",
                {"reason": ItemRejectCode},
                former_name="bell_relay_item_rejections_total",
            ),
            signature_rejections=labeled_counter(
                registry,
                "bell_audit_push_signature_rejections_total",
                "Refused signatures by internal reason (callers only see unauthorized).",
                {"reason": SignatureRejectReason},
                former_name="bell_relay_signature_rejections_total",
            ),
            ingest_events=labeled_counter(
                registry,
                "bell_ingest_events_total",
                "New Kafka events handled by the audit/notification ingest, by outcome.",
                {"outcome": IngestOutcome},
            ),
        )
        for metric in (
            metrics.requests,
            metrics.item_results,
            metrics.item_rejections,
            metrics.signature_rejections,
            metrics.ingest_events,
        ):
            metric.initialize_all()
        return metrics
