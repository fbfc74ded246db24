"""``POST /internal/v1/audit-events:batch`` (contract sense-audit-relay-v1): limits, signature, deadline.

Order: a ``Content-Type`` other than ``application/json`` is refused first (``400 invalid_json``: the frozen
contract declares no 415, see docs/decisions.md), then the declared ``Content-Length`` is checked before
any body byte is read, the streamed body is
counted while it arrives (chunked bodies too) and refused at ``MAX_BODY_BYTES + 1``; then the signature
is verified over the raw request target; then the batch is handled. One deadline of
``REQUEST_DEADLINE_SECONDS`` covers reading (``408 request_timeout``) and handling
(``503 deadline_exceeded``). Responses carry only stable codes: never the body, a signature or a secret.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import asyncpg
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from bell_receiver.domain.errors import (
    AuditBatchRefused,
    BatchBodyTooLarge,
    BatchDeadlineExceeded,
    BatchRequestTimeout,
    BatchUnauthorized,
    BatchUnavailable,
    InvalidBatch,
)
from bell_receiver.entrypoints.dependencies import BatchChecks, Checks, UseCases
from bell_receiver.service_layer.audit_batch_receiver import AnswerKind, AuditBatchReceiver, BatchAnswer
from bell_receiver.service_layer.metrics import BellMetrics, RequestOutcome
from yovision_platform.audit_push import (
    BATCH_PATH,
    CONTRACT_NAME,
    ITEM_TRACEPARENTS_HEADER,
    MAX_BATCH_ITEMS,
    MAX_BODY_BYTES,
    BatchErrorCode,
    BatchResult,
    ErrorBody,
    error_body,
    parse_item_traceparents,
)
from yovision_platform.errors import SignatureError
from yovision_platform.security import (
    HEADER_KEY_ID,
    HEADER_NONCE,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    VerifiedRequest,
    verify_request,
)

log = logging.getLogger(__name__)

JSON_MEDIA_TYPE = "application/json"

_KIND_OUTCOME = {
    AnswerKind.PROCESSED: RequestOutcome.PROCESSED,
    AnswerKind.INVALID_BATCH: RequestOutcome.INVALID_BATCH,
    AnswerKind.REPLAYED: RequestOutcome.REPLAYED,
}


def refusal_response(refused: AuditBatchRefused) -> Response:
    """The frozen contract's answer to a refusal: ``{"error": code}`` with the refusal's status."""
    return Response(error_body(refused.batch_code), status_code=refused.status, media_type=JSON_MEDIA_TYPE)


async def read_limited_body(request: Request, limit_bytes: int) -> bytes:
    """The request body, refusing more than ``limit_bytes`` before reading further."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit_bytes:
        raise BatchBodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit_bytes:
            raise BatchBodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def declares_json(content_type: str | None) -> bool:
    """True for ``application/json`` with any parameters (``; charset=utf-8``), matched case-insensitively."""
    return content_type is not None and content_type.split(";", 1)[0].strip().lower() == JSON_MEDIA_TYPE


def raw_target(request: Request) -> str:
    """The request target exactly as sent (path plus ``?query``), as the signature covers it."""
    path = bytes(request.scope.get("raw_path") or request.scope["path"].encode("ascii", "replace"))
    query = bytes(request.scope.get("query_string", b""))
    return (path + b"?" + query if query else path).decode("latin-1")


_SIGNING_HEADERS_DOC = {
    name: {"required": True, "description": doc}
    for name, doc in (
        (HEADER_KEY_ID, "Key id, [A-Za-z0-9][A-Za-z0-9._-]{0,63}."),
        (
            HEADER_TIMESTAMP,
            "Unix seconds, ASCII digits, no leading zero; accepted within 300 s of Bell's clock.",
        ),
        (HEADER_NONCE, "16-32 random bytes as lowercase hex; receipts are kept 600 s per (key id, nonce)."),
        (
            HEADER_SIGNATURE,
            "v1= + lowercase hex HMAC-SHA256 over METHOD, path, timestamp, nonce, hex(SHA256(body)).",
        ),
    )
}


def _parameters() -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "in": "header",
            "required": True,
            "schema": {"type": "string"},
            "description": doc["description"],
        }
        for name, doc in _SIGNING_HEADERS_DOC.items()
    ]


def _error_response(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


AUDIT_BATCH_OPENAPI_EXTRA: dict[str, Any] = {
    "parameters": _parameters(),
    "requestBody": {
        "required": True,
        "description": f"At most {MAX_BODY_BYTES} bytes (1 MiB), UTF-8 JSON, no duplicate keys.",
        "content": {JSON_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/AuditEventBatch"}}},
    },
}
AUDIT_BATCH_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": BatchResult, "description": "One result per item, in input order."},
    400: _error_response("invalid_json | invalid_envelope | batch_size_out_of_range (whole batch refused)."),
    401: _error_response("unauthorized: any signature problem, one uniform answer."),
    408: _error_response("request_timeout: the body did not arrive within 10 s."),
    409: _error_response("replay_conflict: this (key id, nonce) was used within 600 s for another request."),
    413: _error_response("body_too_large: more than 1 MiB (declared or streamed)."),
    503: _error_response("deadline_exceeded | unavailable: retry with backoff."),
}


router = APIRouter()


def _count(metrics: BellMetrics, outcome: RequestOutcome, started: float) -> None:
    metrics.requests.labels(outcome=outcome).inc()
    metrics.request_seconds.labels().observe(time.monotonic() - started)


async def _read_body(request: Request, deadline: float) -> bytes:
    """The body of a JSON request, within the deadline and the body limit."""
    if not declares_json(request.headers.get("content-type")):
        raise InvalidBatch(BatchErrorCode.INVALID_JSON)
    try:
        async with asyncio.timeout_at(deadline):
            return await read_limited_body(request, MAX_BODY_BYTES)
    except TimeoutError:
        raise BatchRequestTimeout from None


def _verify(request: Request, body: bytes, checks: BatchChecks) -> VerifiedRequest:
    """The signature's verdict; any problem is the one uniform `BatchUnauthorized`."""
    try:
        return verify_request(
            checks.keyring,
            method=request.method,
            path=raw_target(request),
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw],
            body=body,
            now=checks.clock(),
        )
    except SignatureError as refused:
        checks.metrics.signature_rejections.labels(reason=refused.reason).inc()
        log.info("relay request refused", extra={"error_code": refused.code, "reason": refused.reason.value})
        raise BatchUnauthorized from None


async def _receive(
    receiver: AuditBatchReceiver, request: Request, verified: VerifiedRequest, body: bytes, deadline: float
) -> BatchAnswer:
    try:
        async with asyncio.timeout_at(deadline):
            answered = await receiver.receive(
                verified,
                body,
                parse_item_traceparents(request.headers.get(ITEM_TRACEPARENTS_HEADER), MAX_BATCH_ITEMS),
            )
    except TimeoutError:
        raise BatchDeadlineExceeded from None
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as failure:
        log.warning("relay batch failed", extra={"error_code": type(failure).__name__})
        raise BatchUnavailable from None
    log.info(
        "relay batch handled",
        extra={"key_id": verified.key_id, "outcome": answered.kind.value, "items": len(answered.results)},
    )
    return answered


@router.post(
    BATCH_PATH,
    operation_id="postAuditEventsBatch",
    summary="Append a signed batch of Sense device-audit facts to Bell's audit trail",
    responses=AUDIT_BATCH_RESPONSES,
    openapi_extra=AUDIT_BATCH_OPENAPI_EXTRA,
    response_class=JSONResponse,
    tags=[CONTRACT_NAME],
)
async def post_batch(request: Request, use_cases: UseCases, checks: Checks) -> Response:
    started = time.monotonic()
    deadline = asyncio.get_running_loop().time() + checks.deadline_seconds
    try:
        body = await _read_body(request, deadline)
        verified = _verify(request, body, checks)
        answered = await _receive(use_cases.audit_batches, request, verified, body, deadline)
    except AuditBatchRefused as refused:
        _count(checks.metrics, RequestOutcome.of_refusal(refused.batch_code), started)
        return refusal_response(refused)
    _count(checks.metrics, _KIND_OUTCOME[answered.kind], started)
    return Response(answered.body, status_code=answered.status, media_type=JSON_MEDIA_TYPE)
