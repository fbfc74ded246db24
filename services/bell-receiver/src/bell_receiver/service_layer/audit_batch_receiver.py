"""`AuditBatchReceiver`: Bell's side of Sense's signed audit push, one verified batch at a time.

Everything happens in one unit of work: the nonce receipt is locked and looked up, the envelope parsed,
the new facts appended and the answer stored as the receipt, so a retried request either finds its receipt
(and gets the original bytes) or finds nothing written at all. Concurrent requests with one (key id,
nonce) are serialized by the receipt lock.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from dataclasses import dataclass, field

from bell_receiver.domain.audit import AppendOutcome, Channel, fact_row
from bell_receiver.domain.errors import InvalidBatch, ReplayConflict
from bell_receiver.domain.receipts import Receipt
from bell_receiver.service_layer.metrics import BellMetrics
from bell_receiver.service_layer.ports import AuditTrailStore, UnitOfWorkFactory
from yovision_platform.audit_relay import batch
from yovision_platform.audit_relay.batch import ItemResult, ItemStatus
from yovision_platform.audit_relay.facts import ItemRejectCode, RejectedItem, ValidFact, validate_item
from yovision_platform.signing import VerifiedRequest

HTTP_OK = 200


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


class AuditBatchReceiver:
    def __init__(self, uow: UnitOfWorkFactory, metrics: BellMetrics) -> None:
        self._uow = uow
        self._metrics = metrics

    async def receive(self, verified: VerifiedRequest, body: bytes) -> BatchAnswer:
        """The answer to a verified request; `ReplayConflict` when its nonce answered another request."""
        digest = bytes.fromhex(verified.request_digest_hex)
        async with self._uow() as uow:
            await uow.receipts.lock(verified.key_id, verified.nonce)
            existing = await uow.receipts.find_live(verified.key_id, verified.nonce)
            if existing is not None:
                if existing.request_digest != digest:
                    raise ReplayConflict
                return BatchAnswer(existing.response_status, existing.response_body, AnswerKind.REPLAYED)
            try:
                items = batch.parse_envelope(body)
            except batch.EnvelopeError as error:
                answer = BatchAnswer(
                    InvalidBatch.status, batch.error_body(error.code), AnswerKind.INVALID_BATCH
                )
            else:
                results = await self._append(uow.audit_trail, items)
                answer = BatchAnswer(HTTP_OK, batch.result_body(results), AnswerKind.PROCESSED, results)
            receipt = Receipt(digest, answer.status, answer.body)
            await uow.receipts.store(verified.key_id, verified.nonce, receipt)
        self._count_items(answer.results)
        return answer

    async def _append(self, trail: AuditTrailStore, items: list[object]) -> list[ItemResult]:
        checked = [validate_item(item) for item in items]
        firsts: dict[uuid.UUID, ValidFact] = {}  # the first valid item of each event id, in input order
        for item in checked:
            if isinstance(item, ValidFact):
                firsts.setdefault(item.event_id, item)
        appended = await trail.append([fact_row(f) for f in firsts.values()], Channel.HTTP_RELAY)
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
