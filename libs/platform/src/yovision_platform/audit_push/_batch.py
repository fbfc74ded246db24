"""The batch envelope and response of contract ``sense-audit-relay-v1``. Pure: no I/O.

Bell builds its answers with these models and Sense reads them with the same constants. Decision
(docs/services/bell-receiver.md): a malformed *envelope* (not UTF-8 JSON, duplicate object keys,
NaN/Infinity, not exactly ``{"items": [...]}``, 0 or more than 100 items) is refused as a whole with
``400`` and a stable code, because no item can be attributed. A malformed *item* only rejects that item;
the other items of the batch are processed.

Trace context (`yovision_platform.observability`) travels beside the contract, not in it: the optional header
``ITEM_TRACEPARENTS_HEADER`` lists ``<index>=<traceparent>`` pairs, comma-separated, for the items whose
fact carries one. It is not part of the frozen v1 document (``schemas/openapi/sense-audit-relay-v1.json``)
and the signature does not cover it: it can only join Bell's spans to a trace, never change what is stored
or answered. Bell ignores the whole header when it is longer than ``ITEM_TRACEPARENTS_MAX_CHARS`` or any pair
is malformed, and an index beyond the batch; it never refuses a request for it.
"""

from __future__ import annotations

import enum
import json
import re
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from yovision_platform.audit_push._facts import DeviceAuditFactV1, DeviceAuditFactV2, ItemRejectCode

CONTRACT_NAME: Literal["sense-audit-relay-v1"] = "sense-audit-relay-v1"
BATCH_PATH = "/internal/v1/audit-events:batch"
MIN_BATCH_ITEMS = 1
MAX_BATCH_ITEMS = 100
MAX_BODY_BYTES = 1024 * 1024
REQUEST_DEADLINE_SECONDS = 10.0
ITEM_TRACEPARENTS_HEADER = "yovision-item-traceparents"
_TRACEPARENT_V00_CHARS = 55
ITEM_TRACEPARENTS_MAX_CHARS = MAX_BATCH_ITEMS * (len(f"{MAX_BATCH_ITEMS - 1}=,") + _TRACEPARENT_V00_CHARS)
_ITEM_TRACEPARENT = re.compile(r"(0|[1-9][0-9]?)=(00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2})")


class BatchErrorCode(enum.StrEnum):
    """Stable codes of whole-request error responses (``{"error": code}``)."""

    UNAUTHORIZED = "unauthorized"
    REPLAY_CONFLICT = "replay_conflict"
    BODY_TOO_LARGE = "body_too_large"
    REQUEST_TIMEOUT = "request_timeout"
    INVALID_JSON = "invalid_json"
    INVALID_ENVELOPE = "invalid_envelope"
    BATCH_SIZE_OUT_OF_RANGE = "batch_size_out_of_range"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    UNAVAILABLE = "unavailable"


class ItemStatus(enum.StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"


class AuditEventBatch(BaseModel):
    """Request body: 1..100 device-audit facts, each format 1 or 2 (chosen by ``schema_version``)."""

    model_config = ConfigDict(extra="forbid", title="AuditEventBatch")

    items: Annotated[
        list[Annotated[DeviceAuditFactV1 | DeviceAuditFactV2, Field(discriminator="schema_version")]],
        Field(min_length=MIN_BATCH_ITEMS, max_length=MAX_BATCH_ITEMS),
    ]


class ItemResult(BaseModel):
    """The result of one input item; ``results[i]`` answers ``items[i]``."""

    model_config = ConfigDict(extra="forbid", title="ItemResult")

    index: int = Field(ge=0, lt=MAX_BATCH_ITEMS, description="Position of the item in the request.")
    status: ItemStatus
    event_id: uuid.UUID | None = Field(
        description="The item's event_id when it is a valid UUID, else null. Nothing else is echoed."
    )
    code: ItemRejectCode | None = Field(description="Stable reason when status is rejected, else null.")


class BatchResult(BaseModel):
    """200 response: exactly one result per input item, in input order."""

    model_config = ConfigDict(extra="forbid", title="BatchResult")

    contract: Literal["sense-audit-relay-v1"]
    results: list[ItemResult] = Field(min_length=MIN_BATCH_ITEMS, max_length=MAX_BATCH_ITEMS)


class ErrorBody(BaseModel):
    """Every non-200 response: a stable code, never input, signature or internal detail."""

    model_config = ConfigDict(extra="forbid", title="ErrorBody")

    error: BatchErrorCode


class EnvelopeError(Exception):
    def __init__(self, code: BatchErrorCode) -> None:
        super().__init__(code.value)
        self.code = code


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError("duplicate key")
        result[key] = value
    return result


def _no_constants(_: str) -> Any:
    raise ValueError("NaN and Infinity are not JSON")


def parse_envelope(body: bytes) -> list[object]:
    """The raw items of a batch body, or EnvelopeError with the whole-batch code."""
    try:
        document = json.loads(
            body.decode("utf-8"), object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constants
        )
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise EnvelopeError(BatchErrorCode.INVALID_JSON) from None
    if (
        not isinstance(document, dict)
        or set(document) != {"items"}
        or not isinstance(document["items"], list)
    ):
        raise EnvelopeError(BatchErrorCode.INVALID_ENVELOPE)
    items: list[object] = document["items"]
    if not MIN_BATCH_ITEMS <= len(items) <= MAX_BATCH_ITEMS:
        raise EnvelopeError(BatchErrorCode.BATCH_SIZE_OUT_OF_RANGE)
    return items


def error_body(code: BatchErrorCode) -> bytes:
    return json.dumps({"error": code.value}, separators=(",", ":")).encode("ascii")


def result_body(results: list[ItemResult]) -> bytes:
    document = BatchResult(contract=CONTRACT_NAME, results=results)
    return document.model_dump_json().encode("utf-8")


def item_traceparents_header(traceparents: Mapping[int, str]) -> str:
    """The header value for items' traceparents, by item index (version 00 only: what this code writes)."""
    return ",".join(f"{index}={value}" for index, value in sorted(traceparents.items()))


def parse_item_traceparents(value: str | None, item_count: int) -> dict[int, str]:
    """The traceparents of a request's header, by item index; empty when absent, over-long or malformed.
    Shape only: the trace context's own rules (an all-zero id, a reserved flag) are the propagator's."""
    if not value or len(value) > ITEM_TRACEPARENTS_MAX_CHARS:
        return {}
    found: dict[int, str] = {}
    for pair in value.split(","):
        match = _ITEM_TRACEPARENT.fullmatch(pair)
        if match is None:
            return {}
        index = int(match[1])
        if index < item_count:
            found[index] = match[2]
    return found
