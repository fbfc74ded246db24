"""`AuditBatchReceiver`: Bell's side of Sense's signed audit push, one verified batch at a time.

Everything happens in one unit of work: the nonce receipt is locked and looked up, the envelope parsed,
the new facts appended and the answer stored as the receipt, so a retried request either finds its receipt
(and gets the original bytes) or finds nothing written at all. Concurrent requests with one (key id,
nonce) are serialized by the receipt lock.

Each item whose traceparent came with the request (`yovision_platform.audit_push`, outside the
signature) is stored with that trace's id and gets an "audit store" span in it.
"""

from __future__ import annotations

import enum
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind

from bell_receiver.domain.audit import AppendOutcome, Channel, fact_row
from bell_receiver.domain.errors import InvalidBatch, ReplayConflict
from bell_receiver.domain.receipts import Receipt
from bell_receiver.service_layer.metrics import BellMetrics
from bell_receiver.service_layer.ports import AuditTrailStore, UnitOfWorkFactory
from yovision_platform import audit_push
from yovision_platform.audit_push import (
    ItemRejectCode,
    ItemResult,
    ItemStatus,
    RejectedItem,
    ValidFact,
    validate_item,
)
from yovision_platform.observability import context_of, record_span, trace_id_of, tracer
from yovision_platform.security import VerifiedRequest

HTTP_OK = 200
_tracer = tracer(__name__)


class AnswerKind(enum.StrEnum):
    PROCESSED = "processed"
    INVALID_BATCH = "invalid_batch"
    REPLAYED = "replayed"


@dataclass(frozen=True)
class BatchAnswer:
    """The response to send: its status and exact bytes (stored as the receipt, replayed byte for byte)."""

    status: int
    body: bytes
    kind: AnswerKind
    results: list[ItemResult] = field(default_factory=list)


def _rejected(index: int, code: ItemRejectCode, event_id: uuid.UUID | None) -> ItemResult:
    return ItemResult(index=index, status=ItemStatus.REJECTED, event_id=event_id, code=code)


def _record_store_spans(contexts: Mapping[uuid.UUID, Context], started_ns: int) -> None:
    ended_ns = time.time_ns()
    for event_id, context in contexts.items():
        record_span(
            _tracer,
            "audit store",
            parent=context,
            kind=SpanKind.CONSUMER,
            start_ns=started_ns,
            end_ns=ended_ns,
            attributes={"yovision.event_id": str(event_id), "yovision.channel": Channel.HTTP_RELAY.value},
        )


class AuditBatchReceiver:
    def __init__(self, uow: UnitOfWorkFactory, metrics: BellMetrics) -> None:
        self._uow = uow
        self._metrics = metrics

    async def receive(
        self, verified: VerifiedRequest, body: bytes, traceparents: Mapping[int, str] | None = None
    ) -> BatchAnswer:
        """The answer to a verified request; `ReplayConflict` when its nonce answered another request.
        `traceparents`: the items' trace contexts by index (never part of the answer)."""
        digest = bytes.fromhex(verified.request_digest_hex)
        async with self._uow() as uow:
            await uow.receipts.lock(verified.key_id, verified.nonce)
            existing = await uow.receipts.find_live(verified.key_id, verified.nonce)
            if existing is not None:
                if existing.request_digest != digest:
                    raise ReplayConflict
                return BatchAnswer(existing.response_status, existing.response_body, AnswerKind.REPLAYED)
            try:
                items = audit_push.parse_envelope(body)
            except audit_push.EnvelopeError as error:
                answer = BatchAnswer(
                    InvalidBatch.status, audit_push.error_body(error.code), AnswerKind.INVALID_BATCH
                )
            else:
                results = await self._append(uow.audit_trail, items, traceparents or {})
                answer = BatchAnswer(HTTP_OK, audit_push.result_body(results), AnswerKind.PROCESSED, results)
            receipt = Receipt(digest, answer.status, answer.body)
            await uow.receipts.store(verified.key_id, verified.nonce, receipt)
        self._count_items(answer.results)
        return answer

    async def _append(
        self, trail: AuditTrailStore, items: list[object], traceparents: Mapping[int, str]
    ) -> list[ItemResult]:
        checked = [validate_item(item) for item in items]
        firsts: dict[uuid.UUID, ValidFact] = {}  # the first valid item of each event id, in input order
        contexts: dict[uuid.UUID, Context] = {}  # and the trace context that came with it
        for index, item in enumerate(checked):
            if isinstance(item, ValidFact) and item.event_id not in firsts:
                firsts[item.event_id] = item
                if index in traceparents:
                    contexts[item.event_id] = context_of(traceparents[index])
        # Only an item's own context names its trace (the request's is the push's, not the fact's).
        trace_ids = {event_id: trace_id_of(context) for event_id, context in contexts.items()}
        rows = [replace(fact_row(f), trace_id=trace_ids.get(f.event_id)) for f in firsts.values()]
        started_ns = time.time_ns()
        appended = await trail.append(rows, Channel.HTTP_RELAY)
        _record_store_spans(contexts, started_ns)
        answers = dict(zip(firsts, zip(firsts.values(), appended, strict=True), strict=True))
        results: list[ItemResult] = []
        for index, item in enumerate(checked):
            if isinstance(item, RejectedItem):
                results.append(_rejected(index, item.code, item.event_id))
                continue
            event_id = item.event_id
            first, answer = answers[event_id]
            if item is first and answer.outcome is AppendOutcome.INSERTED:
                status = ItemStatus.ACCEPTED
            elif answer.stored_digest == item.digest:  # stored before, or earlier in this batch
                status = ItemStatus.DUPLICATE
            else:
                results.append(_rejected(index, ItemRejectCode.ID_CONFLICT, event_id))
                continue
            results.append(ItemResult(index=index, status=status, event_id=event_id, code=None))
        return results

    def _count_items(self, results: list[ItemResult]) -> None:
        for status, count in Counter(result.status for result in results).items():
            self._metrics.item_results.labels(outcome=status).inc(count)
        rejections = Counter(
            result.code
            for result in results
            if result.status is ItemStatus.REJECTED and result.code is not None
        )
        for code, count in rejections.items():
            self._metrics.item_rejections.labels(reason=code).inc(count)
