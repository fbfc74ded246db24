"""Handle one verified relay batch: nonce receipt, envelope, per-item append, stored response.

Everything happens in one transaction: the audit rows and the receipt commit together, so a retried
request either finds its receipt (and gets the original bytes) or finds nothing written at all.
Concurrent requests with one (key id, nonce) are serialized by an advisory lock.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

import asyncpg

from bell_receiver.adapters.audit_trail import AppendOutcome, AuditRow, AuditTrail, Channel
from bell_receiver.adapters.receipts import Receipt, ReceiptStore
from yovision_platform.audit_relay.batch import (
    BatchErrorCode,
    EnvelopeError,
    ItemResult,
    ItemStatus,
    error_body,
    parse_envelope,
    result_body,
)
from yovision_platform.audit_relay.facts import (
    EVENT_TYPE,
    SOURCE_SYSTEM,
    ItemRejectCode,
    RejectedItem,
    ValidFact,
    validate_item,
)
from yovision_platform.db import DbConnection, Identifier
from yovision_platform.signing import VerifiedRequest

HTTP_OK = 200
HTTP_BAD_REQUEST = 400
HTTP_CONFLICT = 409


class ResponseKind(enum.StrEnum):
    PROCESSED = "processed"
    INVALID_BATCH = "invalid_batch"
    REPLAYED = "replayed"
    REPLAY_CONFLICT = "replay_conflict"


@dataclass(frozen=True)
class RelayResponse:
    status: int
    body: bytes
    kind: ResponseKind
    results: list[ItemResult] = field(default_factory=list)


def fact_row(valid: ValidFact) -> AuditRow:
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


def _rejected(index: int, code: ItemRejectCode, event_id: uuid.UUID | None) -> ItemResult:
    return ItemResult(index=index, status=ItemStatus.REJECTED, event_id=event_id, code=code)


class RelayHandler:
    def __init__(self, pool: asyncpg.Pool, schema: Identifier) -> None:
        self._pool = pool
        self._trail = AuditTrail(schema)
        self._receipts = ReceiptStore(schema)

    async def handle(self, verified: VerifiedRequest, body: bytes) -> RelayResponse:
        digest = bytes.fromhex(verified.request_digest_hex)
        async with self._pool.acquire() as conn, conn.transaction():
            await self._receipts.lock(conn, verified.key_id, verified.nonce)
            existing = await self._receipts.find_live(conn, verified.key_id, verified.nonce)
            if existing is not None:
                if existing.request_digest == digest:
                    return RelayResponse(
                        existing.response_status, existing.response_body, ResponseKind.REPLAYED
                    )
                return RelayResponse(
                    HTTP_CONFLICT, error_body(BatchErrorCode.REPLAY_CONFLICT), ResponseKind.REPLAY_CONFLICT
                )
            try:
                items = parse_envelope(body)
            except EnvelopeError as error:
                response = RelayResponse(HTTP_BAD_REQUEST, error_body(error.code), ResponseKind.INVALID_BATCH)
            else:
                results = await self._apply(conn, items)
                response = RelayResponse(HTTP_OK, result_body(results), ResponseKind.PROCESSED, results)
            receipt = Receipt(digest, response.status, response.body)
            await self._receipts.store(conn, verified.key_id, verified.nonce, receipt)
        return response

    async def _apply(self, conn: DbConnection, items: list[object]) -> list[ItemResult]:
        checked = [validate_item(item) for item in items]
        first_index: dict[uuid.UUID, int] = {}
        firsts: list[ValidFact] = []
        for index, item in enumerate(checked):
            if isinstance(item, ValidFact) and item.event_id not in first_index:
                first_index[item.event_id] = index
                firsts.append(item)
        appended = await self._trail.append(conn, [fact_row(f) for f in firsts], Channel.HTTP_RELAY)
        by_index = dict(zip(first_index.values(), appended, strict=True))
        stored_digest = {checked_id: by_index[i].stored_digest for checked_id, i in first_index.items()}
        results: list[ItemResult] = []
        for index, item in enumerate(checked):
            if isinstance(item, RejectedItem):
                results.append(_rejected(index, item.code, item.event_id))
                continue
            outcome = by_index[index].outcome if index in by_index else None
            if outcome is AppendOutcome.INSERTED:
                status = ItemStatus.ACCEPTED
            elif stored_digest[item.event_id] == item.digest:
                status = ItemStatus.DUPLICATE
            else:
                results.append(_rejected(index, ItemRejectCode.ID_CONFLICT, item.event_id))
                continue
            results.append(ItemResult(index=index, status=status, event_id=item.event_id, code=None))
        return results
