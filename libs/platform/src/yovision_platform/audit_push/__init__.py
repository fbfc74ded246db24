"""Contract ``sense-audit-relay-v1``: Sense's signed batch push of device-audit facts to Bell (SPEC §4).

The one place where the contract's constants and rules are written; Sense (producer) and Bell (consumer)
both import them, and ``schemas/openapi/sense-audit-relay-v1.json`` is generated from these models (frozen:
a change means publishing v2).

- :mod:`._facts`: the fact formats 1 and 2, their canonical document and digest, one clock and one
  precision for ``occurred_at``, and the mapping to and from the ``DeviceAuditRecorded`` Kafka event, so
  a fact that reaches Bell over both channels is recognised as the same fact (``duplicate``).
- :mod:`._batch`: the request envelope (1..100 items, at most 1 MiB), the per-item results
  (``accepted | duplicate | rejected``), whole-request error codes, and the endpoint path.

Signing (headers, canonical string, skew, nonce receipts) is :mod:`yovision_platform.security`.
"""

from yovision_platform.audit_push._batch import (
    BATCH_PATH,
    CONTRACT_NAME,
    ITEM_TRACEPARENTS_HEADER,
    ITEM_TRACEPARENTS_MAX_CHARS,
    MAX_BATCH_ITEMS,
    MAX_BODY_BYTES,
    MIN_BATCH_ITEMS,
    REQUEST_DEADLINE_SECONDS,
    AuditEventBatch,
    BatchErrorCode,
    BatchResult,
    EnvelopeError,
    ErrorBody,
    ItemResult,
    ItemStatus,
    error_body,
    item_traceparents_header,
    parse_envelope,
    parse_item_traceparents,
    result_body,
)
from yovision_platform.audit_push._facts import (
    EVENT_TYPE,
    SOURCE_SYSTEM,
    AuditEventParts,
    ItemRejectCode,
    RejectedItem,
    ValidFact,
    audit_event_parts,
    canonical_timestamp,
    digest_of,
    epoch_millis,
    fact_document,
    fact_from_audit_event,
    fact_time,
    validate_item,
)

__all__ = [
    "BATCH_PATH",
    "CONTRACT_NAME",
    "EVENT_TYPE",
    "ITEM_TRACEPARENTS_HEADER",
    "ITEM_TRACEPARENTS_MAX_CHARS",
    "MAX_BATCH_ITEMS",
    "MAX_BODY_BYTES",
    "MIN_BATCH_ITEMS",
    "REQUEST_DEADLINE_SECONDS",
    "SOURCE_SYSTEM",
    "AuditEventBatch",
    "AuditEventParts",
    "BatchErrorCode",
    "BatchResult",
    "EnvelopeError",
    "ErrorBody",
    "ItemRejectCode",
    "ItemResult",
    "ItemStatus",
    "RejectedItem",
    "ValidFact",
    "audit_event_parts",
    "canonical_timestamp",
    "digest_of",
    "epoch_millis",
    "error_body",
    "fact_document",
    "fact_from_audit_event",
    "fact_time",
    "item_traceparents_header",
    "parse_envelope",
    "parse_item_traceparents",
    "result_body",
    "validate_item",
]
