"""`AuditBatchReceiver` on the fakes: per-item results in input order, the first occurrence of an id decides,
the answer is the nonce's receipt (replayed byte for byte, or a conflict for another request), a malformed
envelope is answered and remembered too, and a failure before the receipt is stored leaves nothing."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider

from bell_receiver.domain.errors import ReplayConflict
from bell_receiver.service_layer.audit_batch_receiver import AnswerKind
from tests.support.audit_push_client import batch_body, fact
from tests.unit.bell_receiver.conftest import Fakes, verified
from yovision_platform.security import NONCE_RECEIPT_TTL_SECONDS


async def test_one_batch_mixes_accepted_duplicate_and_rejected_items_in_input_order(fakes: Fakes) -> None:
    receiver = fakes.use_cases().audit_batches
    known = fact()
    await receiver.receive(verified(batch_body([known])), batch_body([known]))
    fresh = fact(2)
    secret = "postgresql://user:hunter2@db/prod"
    items: list[object] = [
        fresh,
        known,
        {**known, "actor": "operator:bob"},
        dict(fresh),
        {**fact(), "source_uri": secret},
        "not an object",
        {**fact(), "schema_version": 3},
        {k: v for k, v in fact().items() if k != "actor"},
        {**fact(), "occurred_at": "2026-11-30T01:02:03"},
        {**fresh, "actor": "operator:bob"},  # the id accepted above, in this batch, with another digest
    ]
    body = batch_body(items)
    answer = await receiver.receive(verified(body), body)
    assert (answer.status, answer.kind) == (200, AnswerKind.PROCESSED)
    results = json.loads(answer.body)["results"]
    assert [r["index"] for r in results] == list(range(len(items)))
    assert [(r["status"], r["code"]) for r in results] == [
        ("accepted", None),
        ("duplicate", None),
        ("rejected", "id_conflict"),
        ("duplicate", None),
        ("rejected", "unknown_field"),
        ("rejected", "not_an_object"),
        ("rejected", "unsupported_schema_version"),
        ("rejected", "missing_field"),
        ("rejected", "invalid_field"),
        ("rejected", "id_conflict"),
    ]
    assert results[0]["event_id"] == fresh["event_id"] and results[5]["event_id"] is None
    assert b"hunter2" not in answer.body and b"operator" not in answer.body
    assert [(str(r.event_id), r.actor, r.channel) for r in await fakes.stored()] == [
        (known["event_id"], "operator:alice", "http_relay"),
        (fresh["event_id"], "operator:alice", "http_relay"),
    ]
    assert fakes.metric("bell_audit_push_item_results_total", outcome="accepted") == 2
    assert fakes.metric("bell_audit_push_item_results_total", outcome="duplicate") == 2
    assert fakes.metric("bell_audit_push_item_rejections_total", reason="id_conflict") == 2


async def test_the_same_request_again_gets_the_original_bytes_and_changes_nothing(fakes: Fakes) -> None:
    receiver = fakes.use_cases().audit_batches
    body = batch_body([fact(), fact(2)])
    request = verified(body)
    first = await receiver.receive(request, body)
    again = await receiver.receive(request, body)
    assert (again.status, again.body, again.kind) == (first.status, first.body, AnswerKind.REPLAYED)
    assert again.results == [] and len(await fakes.stored()) == 2
    assert fakes.metric("bell_audit_push_item_results_total", outcome="accepted") == 2  # counted once


async def test_another_request_with_a_used_nonce_is_a_replay_conflict_and_stores_nothing(
    fakes: Fakes,
) -> None:
    receiver = fakes.use_cases().audit_batches
    first, second = batch_body([fact()]), batch_body([fact()])
    await receiver.receive(verified(first, nonce="ab" * 16), first)
    with pytest.raises(ReplayConflict) as refused:
        await receiver.receive(verified(second, nonce="ab" * 16), second)
    assert (refused.value.status, refused.value.code) == (409, "replay_conflict")
    assert len(await fakes.stored()) == 1


async def test_a_whole_batch_refusal_is_remembered_for_its_nonce(fakes: Fakes) -> None:
    receiver = fakes.use_cases().audit_batches
    body = b'{"items": []}'
    request = verified(body)
    first = await receiver.receive(request, body)
    again = await receiver.receive(request, body)
    assert (first.status, first.body, first.kind) == (
        400,
        b'{"error":"batch_size_out_of_range"}',
        AnswerKind.INVALID_BATCH,
    )
    assert (again.status, again.body, again.kind) == (400, first.body, AnswerKind.REPLAYED)
    with pytest.raises(ReplayConflict):
        await receiver.receive(verified(body, nonce=request.nonce, request=b"another request"), body)


@pytest.mark.parametrize(
    ("age", "replayed"), [(NONCE_RECEIPT_TTL_SECONDS - 1, True), (NONCE_RECEIPT_TTL_SECONDS, False)]
)
async def test_a_receipt_answers_for_its_lifetime_then_the_nonce_is_new(
    fakes: Fakes, age: int, replayed: bool
) -> None:
    receiver = fakes.use_cases().audit_batches
    body = batch_body([fact()])
    request = verified(body)
    await receiver.receive(request, body)
    fakes.clock.now += age
    other = batch_body([fact()])
    if replayed:
        with pytest.raises(ReplayConflict):
            await receiver.receive(verified(other, nonce=request.nonce), other)
        return
    answer = await receiver.receive(verified(other, nonce=request.nonce), other)
    assert answer.kind is AnswerKind.PROCESSED and len(await fakes.stored()) == 2


async def test_a_failure_before_the_receipt_is_stored_leaves_no_fact_and_no_count(
    fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken(Exception):
        pass

    async def broken_store(*_: object) -> None:
        raise Broken

    monkeypatch.setattr(fakes.uow.receipts, "store", broken_store)
    body = batch_body([fact(), fact()])
    with pytest.raises(Broken):
        await fakes.use_cases().audit_batches.receive(verified(body), body)
    assert await fakes.stored() == []
    assert fakes.metric("bell_audit_push_item_results_total", outcome="accepted") == 0


async def test_each_fact_is_stored_with_its_own_items_trace_and_none_without_one(fakes: Fakes) -> None:
    """The item header's context names a fact's trace; a fact without one has none, not the trace of the
    push request it came in (the span current while the batch is stored)."""
    receiver = fakes.use_cases().audit_batches
    item_trace = "0af7651916cd43dd8448eb211c80319c"
    traced, untraced = fact(), fact(2)
    body = batch_body([traced, untraced])
    with TracerProvider().get_tracer("test").start_as_current_span("POST /internal/v1/audit-events:batch"):
        await receiver.receive(verified(body), body, {0: f"00-{item_trace}-b7ad6b7169203331-01"})
    stored = {str(row.event_id): row.trace_id for row in fakes.uow.audit_trail.rows.values()}
    assert stored == {traced["event_id"]: item_trace, untraced["event_id"]: None}
