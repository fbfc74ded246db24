"""The canonical bytes of contract ``sense-audit-relay-v1``, pinned: the document of a fact (from an HTTP
item or a Kafka event), of any other event Bell stores, their SHA-256 digests, and Bell's answer.

Bell stores ``payload_digest`` and compares it with every later copy of a fact (``duplicate`` vs
``id_conflict``), so a changed byte would turn every re-sent stored fact into a conflict. The expected
values below were produced by the stdlib-``json`` implementation (``json.dumps(sort_keys=True,
separators=(",", ":"), ensure_ascii=False)``, UTF-8) before any codec change; they must never be
regenerated, only matched.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from yovision_platform.audit_push import ItemResult, ItemStatus, result_body
from yovision_platform.audit_push._facts import (
    ItemRejectCode,
    RejectedItem,
    ValidFact,
    canonical_json,
    digest_of,
    fact_from_audit_event,
    validate_item,
)

FACTS: dict[str, tuple[dict[str, Any], bytes, str]] = {
    "format 1, upper-case id, +02:00 offset, every id character class": (
        {
            "schema_version": 1,
            "event_id": "0B7C8A36-6F0E-4C53-9D2C-2F9B3D8F2A11",
            "occurred_at": "2026-11-30T03:02:03.456789+02:00",
            "tenant_id": "tenant-a",
            "site_id": "site.1:x",
            "device_id": "dev_0001",
            "action": "device.config_changed",
            "actor": "svc@sense.local",
            "changed_fields": ["name", "source_uri"],
        },
        b'{"action":"device.config_changed","actor":"svc@sense.local","changed_fields":["name","source_uri"],'
        b'"device_id":"dev_0001","event_id":"0b7c8a36-6f0e-4c53-9d2c-2f9b3d8f2a11",'
        b'"occurred_at":"2026-11-30T01:02:03.456789Z","schema_version":1,"site_id":"site.1:x",'
        b'"tenant_id":"tenant-a"}',
        "52018ecf8fb375df11c577f4b6bbb06bc6873cbaad80b4a3e2fbcb602457e398",
    ),
    "format 2, largest config version, no changed fields, whole seconds": (
        {
            "schema_version": 2,
            "event_id": "4e7f9a10-2b3c-4d5e-8f60-718293a4b5c6",
            "occurred_at": "1999-12-31T23:59:59Z",
            "tenant_id": "T",
            "site_id": "s-9",
            "device_id": "d",
            "action": "device.created",
            "actor": "operator:alice",
            "changed_fields": [],
            "config_version": 9223372036854775807,
            "correlation_id": "req-42",
        },
        b'{"action":"device.created","actor":"operator:alice","changed_fields":[],'
        b'"config_version":9223372036854775807,"correlation_id":"req-42","device_id":"d",'
        b'"event_id":"4e7f9a10-2b3c-4d5e-8f60-718293a4b5c6","occurred_at":"1999-12-31T23:59:59.000000Z",'
        b'"schema_version":2,"site_id":"s-9","tenant_id":"T"}',
        "81a08bbfc06c185afdc873d1c5bf584f4d869c4bffc75604795e695195a1cd69",
    ),
    "format 2, correlation id absent (null), -07:30 offset, config version 0": (
        {
            "schema_version": 2,
            "event_id": "00000000-0000-4000-8000-000000000000",
            "occurred_at": "2026-01-02T03:04:05.006-07:30",
            "tenant_id": "tenant-a",
            "site_id": "site-1",
            "device_id": "dev-0001",
            "action": "device.deleted",
            "actor": "a",
            "changed_fields": ["desired_state"],
            "config_version": 0,
        },
        b'{"action":"device.deleted","actor":"a","changed_fields":["desired_state"],"config_version":0,'
        b'"correlation_id":null,"device_id":"dev-0001","event_id":"00000000-0000-4000-8000-000000000000",'
        b'"occurred_at":"2026-01-02T10:34:05.006000Z","schema_version":2,"site_id":"site-1",'
        b'"tenant_id":"tenant-a"}',
        "cd5c8e6b31476b9b90720431c137b5642f9487a8bbcd8a0a72396985608e8b73",
    ),
    "format 2, a year before 1000 (today's text has no leading zero), two changed fields": (
        {
            "schema_version": 2,
            "event_id": "9b2f4c1e-8a7d-4e6f-b5c4-3a2b1c0d9e8f",
            "occurred_at": "0999-12-31T23:59:59.5+00:30",
            "tenant_id": "tenant-a",
            "site_id": "site-1",
            "device_id": "dev-0001",
            "action": "device.desired_state_changed",
            "actor": "operator:alice",
            "changed_fields": ["desired_state", "name"],
            "config_version": 12,
            "correlation_id": "req-7",
        },
        b'{"action":"device.desired_state_changed","actor":"operator:alice",'
        b'"changed_fields":["desired_state","name"],"config_version":12,"correlation_id":"req-7",'
        b'"device_id":"dev-0001","event_id":"9b2f4c1e-8a7d-4e6f-b5c4-3a2b1c0d9e8f",'
        b'"occurred_at":"999-12-31T23:29:59.500000Z","schema_version":2,"site_id":"site-1",'
        b'"tenant_id":"tenant-a"}',
        "19a59884135a3bb3b0cfded554647a7d089f0dc2c58f03e207d7213591cfcc47",
    ),
}

# Another service's event as Bell stores it (`bell_receiver.domain.audit.generic_row`): any JSON value, so
# non-ASCII text, escapes, control characters, floats, big integers, nesting and key order all count.
GENERIC_DOCUMENT: dict[str, Any] = {
    "event_type": "RecordingUploaded",
    "occurred_at": "2026-11-30T01:02:03.456000Z",
    "aggregate_id": "rec-1",
    "title": "Kamera S\u00fcd \u2013 \u5317\u9580 \U0001f3a5",
    "note": 'line\nbreak "quoted" back\\slash \t tab \u0000 nul \u001f \u007f \u2028 sep',
    "size": 12345678901234567890,
    "ratio": 0.1,
    "tiny": 1e-7,
    "big": 1e16,
    "neg": -2.5,
    "flag": True,
    "off": False,
    "none": None,
    "nested": {"b": [1, {"z": "\u00e9", "a": []}], "a": {}},
    "Z": 1,
    "a": 2,
    "\u00e9": 3,
    "\u00e4": 4,
}
GENERIC_CANONICAL = (
    '{"Z":1,"a":2,"aggregate_id":"rec-1","big":1e+16,"event_type":"RecordingUploaded","flag":true,'
    '"neg":-2.5,"nested":{"a":{},"b":[1,{"a":[],"z":"\u00e9"}]},"none":null,'
    '"note":"line\\nbreak \\"quoted\\" back\\\\slash \\t tab \\u0000 nul \\u001f \u007f \u2028 sep",'
    '"occurred_at":"2026-11-30T01:02:03.456000Z","off":false,"ratio":0.1,"size":12345678901234567890,'
    '"tiny":1e-07,"title":"Kamera S\u00fcd \u2013 \u5317\u9580 \U0001f3a5","\u00e4":4,"\u00e9":3}'
).encode()
GENERIC_DIGEST = "a644a723b85ec3274413978ab33d12a85a8bffa9c3cff5929fad0f0f01e04c84"

KAFKA_RECORD: dict[str, Any] = {
    "envelope": {
        "event_id": uuid.UUID("0b7c8a36-6f0e-4c53-9d2c-2f9b3d8f2a11"),
        "occurred_at": datetime(2026, 11, 30, 1, 2, 3, 456000, tzinfo=UTC),
        "correlation_id": "req-42",
    },
    "action": "device.config_changed",
    "actor": "svc@sense.local",
    "device_id": "dev_0001",
    "tenant_id": "tenant-a",
    "site_id": "site.1:x",
    "changed_fields": ["name", "source_uri"],
    "config_version": 5,
}
KAFKA_FACTS: dict[int, tuple[bytes, str]] = {
    1: (
        b'{"action":"device.config_changed","actor":"svc@sense.local","changed_fields":["name","source_uri"],'
        b'"device_id":"dev_0001","event_id":"0b7c8a36-6f0e-4c53-9d2c-2f9b3d8f2a11",'
        b'"occurred_at":"2026-11-30T01:02:03.456000Z","schema_version":1,"site_id":"site.1:x",'
        b'"tenant_id":"tenant-a"}',
        "4ebfabe56de16af44ec93c3177586b45e8ff64e29cc9b9d141f91d8d7861645e",
    ),
    2: (
        b'{"action":"device.config_changed","actor":"svc@sense.local","changed_fields":["name","source_uri"],'
        b'"config_version":5,"correlation_id":"req-42","device_id":"dev_0001",'
        b'"event_id":"0b7c8a36-6f0e-4c53-9d2c-2f9b3d8f2a11","occurred_at":"2026-11-30T01:02:03.456000Z",'
        b'"schema_version":2,"site_id":"site.1:x","tenant_id":"tenant-a"}',
        "a6add094efe5c863927c33dbe8a4bffc2f84509b0de078583bace23591af8d3d",
    ),
}


@pytest.mark.parametrize("case", list(FACTS))
def test_a_valid_fact_has_the_pinned_canonical_bytes_and_digest(case: str) -> None:
    item, canonical, digest_hex = FACTS[case]
    valid = validate_item(item)
    assert isinstance(valid, ValidFact)
    assert canonical_json(valid.document) == canonical
    assert valid.digest.hex() == digest_hex == digest_of(valid.document).hex()


def test_any_document_has_the_pinned_canonical_bytes_and_digest() -> None:
    assert canonical_json(GENERIC_DOCUMENT) == GENERIC_CANONICAL
    assert digest_of(GENERIC_DOCUMENT).hex() == GENERIC_DIGEST


@pytest.mark.parametrize("version", [1, 2])
def test_the_kafka_form_of_a_fact_has_the_pinned_canonical_bytes_and_digest(version: int) -> None:
    valid = fact_from_audit_event(KAFKA_RECORD | {"fact_version": version})
    assert isinstance(valid, ValidFact)
    canonical, digest_hex = KAFKA_FACTS[version]
    assert canonical_json(valid.document) == canonical
    assert valid.digest.hex() == digest_hex


@pytest.mark.parametrize("field", ["actor", "tenant_id", "device_id", "action", "correlation_id"])
def test_non_ascii_text_in_a_fact_is_an_invalid_field(field: str) -> None:
    item = dict(FACTS["format 2, largest config version, no changed fields, whole seconds"][0])
    item[field] = "op\u00e9rateur"
    rejected = validate_item(item)
    assert isinstance(rejected, RejectedItem) and rejected.code is ItemRejectCode.INVALID_FIELD


def test_bell_answers_with_the_pinned_result_bytes() -> None:
    results = [
        ItemResult(
            index=0,
            status=ItemStatus.ACCEPTED,
            event_id=uuid.UUID("0b7c8a36-6f0e-4c53-9d2c-2f9b3d8f2a11"),
            code=None,
        ),
        ItemResult(index=1, status=ItemStatus.REJECTED, event_id=None, code=ItemRejectCode.UNKNOWN_FIELD),
    ]
    assert result_body(results) == (
        b'{"contract":"sense-audit-relay-v1","results":['
        b'{"index":0,"status":"accepted","event_id":"0b7c8a36-6f0e-4c53-9d2c-2f9b3d8f2a11","code":null},'
        b'{"index":1,"status":"rejected","event_id":null,"code":"unknown_field"}]}'
    )
