"""Bell's answer → per-item results or a whole-batch failure; nothing ambiguous is ever acknowledged."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from sense_reconciler.domain.audit_push_outcome import (
    BatchFailure,
    ItemResults,
    ItemStatus,
    PushFailureCode,
    parse_batch_response,
)

SENT = [uuid.uuid4(), uuid.uuid4(), uuid.uuid4()]


def result(index: int, status: str = "accepted", code: str | None = None) -> dict[str, Any]:
    return {"index": index, "status": status, "event_id": str(SENT[index]), "code": code}


def body(results: list[Any], contract: str = "sense-audit-relay-v1") -> bytes:
    return json.dumps({"contract": contract, "results": results}).encode()


def test_a_complete_answer_yields_one_outcome_per_item_in_order() -> None:
    answer = parse_batch_response(
        200, body([result(0), result(1, "duplicate"), result(2, "rejected", "id_conflict")]), SENT
    )
    assert isinstance(answer, ItemResults)
    assert [(i.event_id, i.status, i.code, i.delivered) for i in answer.items] == [
        (SENT[0], ItemStatus.ACCEPTED, None, True),
        (SENT[1], ItemStatus.DUPLICATE, None, True),
        (SENT[2], ItemStatus.REJECTED, "id_conflict", False),
    ]


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (401, PushFailureCode.UNAUTHORIZED),
        (409, PushFailureCode.REPLAY_CONFLICT),
        (400, PushFailureCode.REQUEST_REFUSED),
        (413, PushFailureCode.REQUEST_REFUSED),
        (499, PushFailureCode.REQUEST_REFUSED),
        (500, PushFailureCode.SERVER_ERROR),
        (503, PushFailureCode.SERVER_ERROR),
        (302, PushFailureCode.REQUEST_REFUSED),
    ],
)
def test_a_non_200_status_fails_the_whole_batch(status: int, code: PushFailureCode) -> None:
    assert parse_batch_response(status, body([result(0), result(1), result(2)]), SENT) == BatchFailure(code)


@pytest.mark.parametrize("count", [0, 2, 4])
def test_missing_or_extra_results_fail_the_whole_batch(count: int) -> None:
    results = [result(i % 3) | {"index": i} for i in range(count)]
    answer = parse_batch_response(200, body(results), SENT)
    assert answer == BatchFailure(PushFailureCode.RESULT_COUNT_MISMATCH)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"not json",
        b"\xff\xfe",
        b"[]",
        json.dumps({"results": []}).encode(),
        body([result(0), result(1), result(2)], contract="sense-audit-relay-v2"),
        body([result(0), result(2), result(1)]),
        body([result(0), result(1), result(2) | {"event_id": str(uuid.uuid4())}]),
        body([result(0), result(1), result(2) | {"event_id": None}]),
        body([result(0), result(1), result(2, "stored")]),
        body([result(0), result(1), result(2, "rejected")]),
        body([result(0), result(1), result(2, "rejected", "Not A Code!")]),
        body([result(0), result(1), result(2, "accepted", "id_conflict")]),
        body([result(0), result(1), result(2) | {"extra": 1}]),
        body([result(0), result(1), result(2) | {"index": True}]),
        body([result(0), result(1), "accepted"]),
    ],
)
def test_a_malformed_answer_fails_the_whole_batch(payload: bytes) -> None:
    assert parse_batch_response(200, payload, SENT) == BatchFailure(PushFailureCode.MALFORMED_RESPONSE)
