"""Bell's answer to one batch, reduced to what the audit push acts on. Pure: no I/O.

Either every item has a result (:class:`ItemResults`) or the whole batch failed and is retried
(:class:`BatchFailure` with a stable :class:`PushFailureCode`). A response is trusted only when it is
exactly the contract's ``BatchResult``: ``contract`` = ``sense-audit-relay-v1``, one result per item in
input order with the item's ``index`` and ``event_id``; anything else is ``malformed_response`` or
``result_count_mismatch`` and nothing is acknowledged.
"""

from __future__ import annotations

import enum
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from yovision_platform.audit_push import CONTRACT_NAME, ItemStatus

__all__ = [
    "BatchFailure",
    "ItemResults",
    "ItemStatus",
    "PushFailureCode",
    "PushItemOutcome",
    "parse_batch_response",
]

HTTP_OK = 200
HTTP_UNAUTHORIZED = 401
HTTP_CONFLICT = 409
HTTP_SERVER_ERROR_MIN = 500
REJECT_CODE_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")


class PushFailureCode(enum.StrEnum):
    """Why a whole batch is retried; persisted as ``last_error_code`` and used as a metric label."""

    NETWORK_ERROR = "network_error"
    TIMEOUT = "timeout"
    SERVER_ERROR = "server_error"
    UNAUTHORIZED = "unauthorized"
    REPLAY_CONFLICT = "replay_conflict"
    REQUEST_REFUSED = "request_refused"
    MALFORMED_RESPONSE = "malformed_response"
    RESULT_COUNT_MISMATCH = "result_count_mismatch"


@dataclass(frozen=True)
class PushItemOutcome:
    event_id: uuid.UUID
    status: ItemStatus
    code: str | None

    @property
    def delivered(self) -> bool:
        return self.status is not ItemStatus.REJECTED


@dataclass(frozen=True)
class ItemResults:
    items: tuple[PushItemOutcome, ...]


@dataclass(frozen=True)
class BatchFailure:
    code: PushFailureCode


def failure_for_status(status_code: int) -> BatchFailure:
    if status_code == HTTP_UNAUTHORIZED:
        return BatchFailure(PushFailureCode.UNAUTHORIZED)
    if status_code == HTTP_CONFLICT:
        return BatchFailure(PushFailureCode.REPLAY_CONFLICT)
    if status_code >= HTTP_SERVER_ERROR_MIN:
        return BatchFailure(PushFailureCode.SERVER_ERROR)
    return BatchFailure(PushFailureCode.REQUEST_REFUSED)


def _item(raw: object, index: int, sent: uuid.UUID) -> PushItemOutcome | None:
    if not isinstance(raw, dict) or set(raw) != {"index", "status", "event_id", "code"}:
        return None
    if raw["index"] != index or type(raw["index"]) is not int or raw["event_id"] != str(sent):
        return None
    try:
        status = ItemStatus(raw["status"])
    except ValueError:
        return None
    code = raw["code"]
    if status is ItemStatus.REJECTED:
        if not isinstance(code, str) or REJECT_CODE_PATTERN.fullmatch(code) is None:
            return None
    elif code is not None:
        return None
    return PushItemOutcome(sent, status, code)


def parse_batch_response(
    status_code: int, body: bytes, sent: Sequence[uuid.UUID]
) -> ItemResults | BatchFailure:
    """Interpret Bell's response to a batch of the facts ``sent`` (their event ids, in request order)."""
    if status_code != HTTP_OK:
        return failure_for_status(status_code)
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return BatchFailure(PushFailureCode.MALFORMED_RESPONSE)
    if (
        not isinstance(document, dict)
        or document.get("contract") != CONTRACT_NAME
        or not isinstance(document.get("results"), list)
    ):
        return BatchFailure(PushFailureCode.MALFORMED_RESPONSE)
    results = document["results"]
    if len(results) != len(sent):
        return BatchFailure(PushFailureCode.RESULT_COUNT_MISMATCH)
    items: list[PushItemOutcome] = []
    for index, (raw, event_id) in enumerate(zip(results, sent, strict=True)):
        item = _item(raw, index, event_id)
        if item is None:
            return BatchFailure(PushFailureCode.MALFORMED_RESPONSE)
        items.append(item)
    return ItemResults(tuple(items))
