"""The batch envelope: whole-batch refusals and their stable codes; response bodies."""

from __future__ import annotations

import json

import pytest

from yovision_platform.audit_push import (
    MAX_BATCH_ITEMS,
    BatchErrorCode,
    EnvelopeError,
    ItemResult,
    ItemStatus,
    error_body,
    parse_envelope,
    result_body,
)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"", BatchErrorCode.INVALID_JSON),
        (b"\xc3\x28", BatchErrorCode.INVALID_JSON),
        (b'{"items": [1], "items": [2]}', BatchErrorCode.INVALID_JSON),
        (b'{"items": [Infinity]}', BatchErrorCode.INVALID_JSON),
        (b"[" * 100_000, BatchErrorCode.INVALID_JSON),
        (b"null", BatchErrorCode.INVALID_ENVELOPE),
        (b'{"batch": []}', BatchErrorCode.INVALID_ENVELOPE),
        (b'{"items": "x"}', BatchErrorCode.INVALID_ENVELOPE),
        (b'{"items": []}', BatchErrorCode.BATCH_SIZE_OUT_OF_RANGE),
    ],
)
def test_whole_batch_refusals(body: bytes, code: BatchErrorCode) -> None:
    with pytest.raises(EnvelopeError) as refused:
        parse_envelope(body)
    assert refused.value.code is code


@pytest.mark.parametrize(
    ("count", "ok"), [(1, True), (MAX_BATCH_ITEMS - 1, True), (MAX_BATCH_ITEMS, True), (101, False)]
)
def test_item_count_boundaries(count: int, ok: bool) -> None:
    body = json.dumps({"items": [{}] * count}).encode()
    if ok:
        assert len(parse_envelope(body)) == count
    else:
        with pytest.raises(EnvelopeError):
            parse_envelope(body)


def test_bodies_hold_only_stable_codes() -> None:
    assert error_body(BatchErrorCode.REPLAY_CONFLICT) == b'{"error":"replay_conflict"}'
    body = result_body([ItemResult(index=0, status=ItemStatus.ACCEPTED, event_id=None, code=None)])
    assert json.loads(body) == {
        "contract": "sense-audit-relay-v1",
        "results": [{"index": 0, "status": "accepted", "event_id": None, "code": None}],
    }
