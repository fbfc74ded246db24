"""Outbox row → contract fact: the exact v1/v2 documents, validated by Bell's own contract models."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sense_reconciler.domain.audit_facts import OutboxFact, batch_body, fact_document
from yovision_platform.audit_push import ValidFact, validate_item

EVENT_ID = uuid.UUID("0b7c5a8e-2f4d-4c1e-9a3b-6d5e4f3a2b1c")
DEVICE_ID = uuid.UUID("5a1f0c2d-3e4b-4a5c-8d6e-7f8091a2b3c4")


def outbox_fact(version: int, **over: object) -> OutboxFact:
    values: dict[str, object] = {
        "id": 7,
        "event_id": EVENT_ID,
        "fact_version": version,
        "action": "device.config_changed",
        "actor": "operator:alice",
        "device_id": DEVICE_ID,
        "tenant_id": "tenant-a",
        "site_id": "site-1",
        "changed_fields": ["name", "source_uri"],
        "config_version": 3,
        "occurred_at": datetime(2026, 11, 30, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=2))),
        "trace_parent": None,
    }
    return OutboxFact.from_row(values | over)


def test_a_v1_fact_carries_exactly_the_format_1_fields_in_utc() -> None:
    assert fact_document(outbox_fact(1)) == {
        "schema_version": 1,
        "event_id": str(EVENT_ID),
        "occurred_at": "2026-11-30T01:04:05.678901Z",
        "tenant_id": "tenant-a",
        "site_id": "site-1",
        "device_id": str(DEVICE_ID),
        "action": "device.config_changed",
        "actor": "operator:alice",
        "changed_fields": ["name", "source_uri"],
    }


def test_a_v2_fact_adds_config_version_and_a_null_correlation_id() -> None:
    document = fact_document(outbox_fact(2))
    assert document["schema_version"] == 2
    assert document["config_version"] == 3 and document["correlation_id"] is None


@pytest.mark.parametrize("version", [1, 2])
def test_bell_accepts_the_document_as_a_valid_fact(version: int) -> None:
    item = json.loads(batch_body([outbox_fact(version)]))["items"][0]
    assert isinstance(validate_item(item), ValidFact)


@pytest.mark.parametrize("version", [0, 3])
def test_an_unknown_fact_version_is_refused(version: int) -> None:
    with pytest.raises(ValueError, match="fact_version"):
        fact_document(outbox_fact(version))


def test_the_body_keeps_the_order_and_is_compact_json() -> None:
    first = outbox_fact(1, occurred_at=datetime(2026, 1, 1, tzinfo=UTC))
    second = outbox_fact(2, id=8, event_id=uuid.uuid4())
    body = batch_body([first, second])
    assert b" " not in body
    assert [item["event_id"] for item in json.loads(body)["items"]] == [str(EVENT_ID), str(second.event_id)]


def test_the_body_has_the_pinned_bytes() -> None:
    """Today's bytes (stdlib json), pinned before the codec changed: a v1 and a v2 fact, microseconds kept,
    offsets converted to UTC."""
    device = uuid.UUID("5f0a9b8c-7d6e-4f30-a1b2-c3d4e5f60718")
    first = outbox_fact(
        1,
        id=1,
        event_id=uuid.UUID("0b7c8a36-6f0e-4c53-9d2c-2f9b3d8f2a11"),
        action="device.created",
        device_id=device,
        changed_fields=["name"],
        occurred_at=datetime(2026, 11, 30, 2, 2, 3, 456000, tzinfo=timezone(timedelta(hours=1))),
    )
    second = outbox_fact(
        2,
        id=2,
        event_id=uuid.UUID("4e7f9a10-2b3c-4d5e-8f60-718293a4b5c6"),
        actor="svc:sense",
        device_id=device,
        config_version=7,
        occurred_at=datetime(2026, 11, 30, 1, 2, 3, 456789, tzinfo=UTC),
    )
    assert batch_body([first, second]) == (
        b'{"items":[{"schema_version":1,"event_id":"0b7c8a36-6f0e-4c53-9d2c-2f9b3d8f2a11",'
        b'"occurred_at":"2026-11-30T01:02:03.456000Z","tenant_id":"tenant-a","site_id":"site-1",'
        b'"device_id":"5f0a9b8c-7d6e-4f30-a1b2-c3d4e5f60718","action":"device.created",'
        b'"actor":"operator:alice","changed_fields":["name"]},{"schema_version":2,'
        b'"event_id":"4e7f9a10-2b3c-4d5e-8f60-718293a4b5c6","occurred_at":"2026-11-30T01:02:03.456789Z",'
        b'"tenant_id":"tenant-a","site_id":"site-1","device_id":"5f0a9b8c-7d6e-4f30-a1b2-c3d4e5f60718",'
        b'"action":"device.config_changed","actor":"svc:sense","changed_fields":["name","source_uri"],'
        b'"config_version":7,"correlation_id":null}]}'
    )


@given(
    text=st.text(),
    config_version=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    version=st.sampled_from([1, 2]),
)
def test_the_body_is_the_stdlib_encoding_of_any_stored_fact(
    text: str, config_version: int, version: int
) -> None:
    """A fact stored before today's validation may hold any text (a PostgreSQL text column: no lone
    surrogate, no NUL) and any bigint; the body is still byte for byte what the stdlib writes."""
    text = text.replace("\x00", "")
    fact = outbox_fact(
        version,
        actor=text,
        action=text,
        tenant_id=text,
        changed_fields=[text, "name"],
        config_version=config_version,
    )
    reference = json.dumps({"items": [fact_document(fact)]}, separators=(",", ":"), ensure_ascii=False)
    assert batch_body([fact]) == reference.encode("utf-8")
