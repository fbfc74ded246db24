"""Device-audit facts v1/v2: validation codes, field limits at/under/over, canonical digest."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support.audit_push_client import fact as audit_fact
from yovision_platform.audit_push._facts import (
    MAX_ACTION_CHARS,
    MAX_ACTOR_CHARS,
    MAX_CHANGED_FIELDS,
    MAX_CORRELATION_ID_CHARS,
    MAX_FIELD_NAME_CHARS,
    MAX_ID_CHARS,
    ItemRejectCode,
    RejectedItem,
    ValidFact,
    fact_from_audit_event,
    validate_item,
)

EVENT_ID = "0b7c8a36-6f0e-4c53-9d2c-2f9b3d8f2a11"


def fact(schema_version: int = 1, **overrides: Any) -> dict[str, Any]:
    """The audit push tests' fact (tests/support/audit_push_client.py) with a fixed event id, one changed
    field and config version 2: the digests below are of these values."""
    item = audit_fact(schema_version) | {"event_id": EVENT_ID, "changed_fields": ["name"]}
    if schema_version == 2:
        item["config_version"] = 2
    return item | overrides


def code_of(item: object) -> ItemRejectCode | None:
    result = validate_item(item)
    return result.code if isinstance(result, RejectedItem) else None


def test_both_formats_validate() -> None:
    assert isinstance(validate_item(fact(1)), ValidFact)
    assert isinstance(validate_item(fact(2)), ValidFact)
    assert isinstance(validate_item({k: v for k, v in fact(2).items() if k != "correlation_id"}), ValidFact)


@pytest.mark.parametrize(
    ("item", "code"),
    [
        ([], ItemRejectCode.NOT_AN_OBJECT),
        ({k: v for k, v in fact().items() if k != "schema_version"}, ItemRejectCode.MISSING_FIELD),
        (fact(schema_version=3), ItemRejectCode.UNSUPPORTED_SCHEMA_VERSION),
        (fact(schema_version="1"), ItemRejectCode.UNSUPPORTED_SCHEMA_VERSION),
        (fact(schema_version=True), ItemRejectCode.UNSUPPORTED_SCHEMA_VERSION),
        ({k: v for k, v in fact(2).items() if k != "config_version"}, ItemRejectCode.MISSING_FIELD),
        (fact(1, config_version=2), ItemRejectCode.UNKNOWN_FIELD),
        (fact(password="hunter2"), ItemRejectCode.UNKNOWN_FIELD),
        (fact(event_id="not-a-uuid"), ItemRejectCode.INVALID_FIELD),
        (fact(event_id=EVENT_ID.replace("-", "")), ItemRejectCode.INVALID_FIELD),
        (fact(event_id="{" + EVENT_ID + "}"), ItemRejectCode.INVALID_FIELD),
        (fact(event_id="urn:uuid:" + EVENT_ID), ItemRejectCode.INVALID_FIELD),
        (fact(event_id=EVENT_ID + "\u0000"), ItemRejectCode.INVALID_FIELD),
        (fact(actor="operator:\u0000alice"), ItemRejectCode.INVALID_FIELD),
        (fact(occurred_at="2026-11-30T01:02:03"), ItemRejectCode.INVALID_FIELD),
        (fact(occurred_at=1764464523), ItemRejectCode.INVALID_FIELD),
        (fact(occurred_at="0001-01-01T00:00:00+05:00"), ItemRejectCode.INVALID_FIELD),  # year 0 in UTC
        (fact(2, config_version="2"), ItemRejectCode.INVALID_FIELD),
        (fact(2, config_version=-1), ItemRejectCode.INVALID_FIELD),
        (fact(action="Device Created"), ItemRejectCode.INVALID_FIELD),
        (fact(changed_fields=["source_uri=rtsp://x"]), ItemRejectCode.INVALID_FIELD),
        (fact(tenant_id=""), ItemRejectCode.INVALID_FIELD),
    ],
)
def test_rejection_codes(item: object, code: ItemRejectCode) -> None:
    assert code_of(item) is code


@pytest.mark.parametrize("offset", ["+23:59", "-20:00", "+15:59", "Z"])
def test_a_valid_fact_is_in_utc_whatever_offset_it_was_written_with(offset: str) -> None:
    """PostgreSQL reads timestamptz offsets up to 15:59 only: a fact at +20:00 once failed its batch (503)."""
    result = validate_item(fact(occurred_at=f"2026-11-30T01:02:03.456789{offset}"))
    assert isinstance(result, ValidFact)
    assert result.fact.occurred_at.utcoffset() is not None and result.fact.occurred_at.tzinfo is UTC


def test_a_rejected_item_keeps_only_a_valid_event_id() -> None:
    rejected = validate_item(fact(actor=""))
    assert isinstance(rejected, RejectedItem) and rejected.event_id == uuid.UUID(EVENT_ID)
    rejected = validate_item(fact(event_id="x", actor=""))
    assert isinstance(rejected, RejectedItem) and rejected.event_id is None
    rejected = validate_item(fact(event_id=EVENT_ID.replace("-", "")))
    assert (
        isinstance(rejected, RejectedItem) and rejected.event_id is None
    )  # never echoed in another spelling


@pytest.mark.parametrize(
    ("field", "limit", "make"),
    [
        ("tenant_id", MAX_ID_CHARS, lambda n: "t" * n),
        ("site_id", MAX_ID_CHARS, lambda n: "s" * n),
        ("device_id", MAX_ID_CHARS, lambda n: "d" * n),
        ("action", MAX_ACTION_CHARS, lambda n: "a" * n),
        ("actor", MAX_ACTOR_CHARS, lambda n: "u" * n),
        ("changed_fields", MAX_CHANGED_FIELDS, lambda n: [f"f{i}" for i in range(n)]),
        ("changed_fields", MAX_FIELD_NAME_CHARS, lambda n: ["f" * n]),
        ("correlation_id", MAX_CORRELATION_ID_CHARS, lambda n: "c" * n),
    ],
)
def test_field_limits_under_at_and_over(field: str, limit: int, make: Any) -> None:
    for size, ok in ((limit - 1, True), (limit, True), (limit + 1, False)):
        assert (code_of(fact(2, **{field: make(size)})) is None) is ok, (field, size)


def test_the_digest_ignores_formatting_but_not_content() -> None:
    base = validate_item(fact(2))
    same = validate_item(fact(2, event_id=EVENT_ID.upper(), occurred_at="2026-11-30T02:02:03.456789+01:00"))
    other = validate_item(fact(2, actor="operator:bob"))
    assert isinstance(base, ValidFact) and isinstance(same, ValidFact) and isinstance(other, ValidFact)
    assert base.digest == same.digest != other.digest
    assert base.document["occurred_at"] == "2026-11-30T01:02:03.456789Z"
    assert base.document["event_id"] == EVENT_ID


@pytest.mark.parametrize("version", [1, 2])
def test_the_kafka_audit_event_yields_the_same_fact_as_the_http_item(version: int) -> None:
    record = {
        "envelope": {
            "event_id": uuid.UUID(EVENT_ID),
            "occurred_at": datetime(2026, 11, 30, 1, 2, 3, 456000, tzinfo=UTC),
            "correlation_id": "req-42",
        },
        "action": "device.config_changed",
        "actor": "operator:alice",
        "device_id": "dev-0001",
        "tenant_id": "tenant-a",
        "site_id": "site-1",
        "changed_fields": ["name"],
        "config_version": 2,
        "fact_version": version,
    }
    from_kafka = fact_from_audit_event(record)
    from_http = validate_item(fact(version, occurred_at="2026-11-30T01:02:03.456Z"))
    assert isinstance(from_kafka, ValidFact) and isinstance(from_http, ValidFact)
    assert from_kafka.digest == from_http.digest
