"""The signed batch endpoint through the real app on the fakes: a batch must be JSON, hold 1..100 items and
be exactly ``{"items": [...]}``; a fact resent with other formatting is a duplicate; a replayed nonce gets
the original bytes, or 409 for another request. Each refusal is the frozen contract's ``{"error": code}``."""

from __future__ import annotations

import json

import pytest

from tests.support.audit_push_client import batch_body, fact
from tests.unit.bell_receiver.conftest import Api
from yovision_platform.audit_push import BATCH_PATH, MAX_BATCH_ITEMS


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("application/json", 200),
        ("Application/JSON; charset=utf-8", 200),
        (None, 400),
        ("text/plain", 400),
        ("application/x-www-form-urlencoded", 400),
        ("application/json-seq", 400),
    ],
)
async def test_a_batch_must_be_sent_as_application_json(
    api: Api, content_type: str | None, status: int
) -> None:
    body = batch_body([fact()])
    headers = api.relay.sign(body)
    if content_type is not None:
        headers["content-type"] = content_type
    response = await api.relay.http.post(BATCH_PATH, content=body, headers=headers)
    assert response.status_code == status
    if status == 400:
        assert response.content == b'{"error":"invalid_json"}'
        assert response.headers["content-type"] == "application/json"


@pytest.mark.parametrize(("count", "status"), [(0, 400), (1, 200), (MAX_BATCH_ITEMS, 200), (101, 400)])
async def test_a_batch_holds_one_to_one_hundred_items(api: Api, count: int, status: int) -> None:
    response = await api.relay.post_items([fact() for _ in range(count)])
    assert response.status_code == status
    if status == 400:
        assert response.json() == {"error": "batch_size_out_of_range"}
    else:
        assert len(response.json()["results"]) == count


async def test_a_fact_resent_with_other_formatting_is_a_duplicate(api: Api) -> None:
    item = fact(2, occurred_at="2026-11-30T02:02:03.456789+01:00")
    assert (await api.relay.post_items([item])).status_code == 200
    same_fact = {**item, "event_id": item["event_id"].upper(), "occurred_at": "2026-11-30T01:02:03.456789Z"}
    body = json.dumps({"items": [dict(reversed(list(same_fact.items())))]}, indent=2).encode()
    response = await api.relay.post_raw(body)
    assert response.json()["results"][0]["status"] == "duplicate"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", "invalid_json"),
        (b"\xff\xfe", "invalid_json"),
        (b'{"items": [], "items": []}', "invalid_json"),
        (b'{"items": [NaN]}', "invalid_json"),
        (b"[]", "invalid_envelope"),
        (b'{"items": {}}', "invalid_envelope"),
        (b'{"items": [], "extra": 1}', "invalid_envelope"),
    ],
)
async def test_a_malformed_envelope_refuses_the_whole_batch(api: Api, body: bytes, code: str) -> None:
    response = await api.relay.post_raw(body)
    assert response.status_code == 400
    assert response.json() == {"error": code}


async def test_each_answer_counts_its_request_outcome(api: Api) -> None:
    body = batch_body([fact()])
    headers = api.relay.sign(body, nonce="cd" * 16)
    assert (await api.relay.post_raw(body, headers=headers)).status_code == 200
    assert (await api.relay.post_raw(body, headers=headers)).status_code == 200
    conflict = await api.relay.post_items([fact()], nonce="cd" * 16)
    assert (conflict.status_code, conflict.content) == (409, b'{"error":"replay_conflict"}')
    assert (await api.relay.post_raw(b"[]")).status_code == 400
    unsigned = await api.relay.http.post(
        BATCH_PATH, content=body, headers={"content-type": "application/json"}
    )
    assert (unsigned.status_code, unsigned.content) == (401, b'{"error":"unauthorized"}')
    counts = {
        outcome: api.fakes.metric("bell_audit_push_requests_total", outcome=outcome)
        for outcome in ("processed", "replayed", "replay_conflict", "invalid_batch", "unauthorized")
    }
    assert counts == {
        "processed": 1,
        "replayed": 1,
        "replay_conflict": 1,
        "invalid_batch": 1,
        "unauthorized": 1,
    }
    assert api.fakes.metric("bell_audit_push_signature_rejections_total", reason="missing_header") == 1


async def test_a_replay_with_the_same_request_gets_the_original_bytes(api: Api) -> None:
    body = batch_body([fact(), fact(2)])
    headers = api.relay.sign(body)
    first = await api.relay.post_raw(body, headers=headers)
    second = await api.relay.post_raw(body, headers=headers)
    assert first.status_code == second.status_code == 200
    assert second.content == first.content
    assert [r["status"] for r in first.json()["results"]] == ["accepted", "accepted"]
    assert len(await api.fakes.stored()) == 2
    assert api.fakes.metric("bell_audit_push_requests_total", outcome="replayed") == 1


async def test_a_replayed_nonce_with_another_request_is_a_replay_conflict(api: Api) -> None:
    nonce = "ab" * 16
    first = await api.relay.post_items([fact()], nonce=nonce)
    second = await api.relay.post_items([fact()], nonce=nonce)
    assert first.status_code == 200
    assert second.status_code == 409
    assert second.content == b'{"error":"replay_conflict"}'
    assert len(await api.fakes.stored()) == 1


async def test_a_replayed_whole_batch_refusal_is_replayed_too(api: Api) -> None:
    body = b'{"items": []}'
    headers = api.relay.sign(body)
    first = await api.relay.post_raw(body, headers=headers)
    again = await api.relay.post_raw(body, headers=headers)
    assert first.status_code == again.status_code == 400
    assert first.content == again.content == b'{"error":"batch_size_out_of_range"}'
