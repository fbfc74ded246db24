"""`validate_item` decides exactly as the contract's reference does, for any JSON item.

The reference is the validation as first written (before the codec changed): the item dumped again by the
stdlib and read by the contract model in pydantic's strict JSON mode, the stdlib's canonical JSON for the
digest. Hypothesis builds items near the contract (each field kept, dropped, or replaced by any JSON value,
unknown keys added) and compares the whole outcome: rejection code and echoed event id, or the canonical
document and its digest.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from yovision_platform.audit_push._facts import (
    CANONICAL_UUID,
    DeviceAuditFactV1,
    DeviceAuditFactV2,
    ItemRejectCode,
    RejectedItem,
    ValidFact,
    canonical_json,
    canonical_timestamp,
    digest_of,
    validate_item,
)

Outcome = tuple[str, Any, Any]


def reference(item: object) -> Outcome:
    """The outcome as the first implementation computed it (code precedence as in `ItemRejectCode`)."""
    if not isinstance(item, dict):
        return ("rejected", ItemRejectCode.NOT_AN_OBJECT, None)
    loose = item.get("event_id")
    event_id = uuid.UUID(loose) if isinstance(loose, str) and CANONICAL_UUID.fullmatch(loose) else None
    if "schema_version" not in item:
        return ("rejected", ItemRejectCode.MISSING_FIELD, event_id)
    version = item["schema_version"]
    if type(version) is not int or version not in (1, 2):
        return ("rejected", ItemRejectCode.UNSUPPORTED_SCHEMA_VERSION, event_id)
    model = DeviceAuditFactV1 if version == 1 else DeviceAuditFactV2
    try:
        fact = model.model_validate_json(json.dumps(item), strict=True)
    except ValidationError as error:
        types = {e["type"] for e in error.errors(include_url=False, include_input=False)}
        code = (
            ItemRejectCode.MISSING_FIELD
            if "missing" in types
            else ItemRejectCode.UNKNOWN_FIELD
            if "extra_forbidden" in types
            else ItemRejectCode.INVALID_FIELD
        )
        return ("rejected", code, event_id)
    document = fact.model_dump(mode="python")
    document["event_id"] = str(fact.event_id)
    document["occurred_at"] = canonical_timestamp(fact.occurred_at)
    return ("valid", canonical_json(document), digest_of(document))


def outcome(item: object) -> Outcome:
    result = validate_item(item)
    if isinstance(result, RejectedItem):
        return ("rejected", result.code, result.event_id)
    assert isinstance(result, ValidFact)
    return ("valid", canonical_json(result.document), result.digest)


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63 - 2, max_value=2**65)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.sampled_from(["", "1", "2", "tenant-a", "\u00e9", "\ud800", "a\u0000", "2026-11-30T01:02:03Z"])
)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3)
)
uuid_texts = st.uuids().map(str) | st.uuids().map(lambda u: str(u).upper()) | st.uuids().map(lambda u: u.hex)
moments = st.sampled_from(
    [
        "2026-11-30T01:02:03.456789Z",
        "2026-11-30T01:02:03Z",
        "2026-11-30T01:02:03.4+23:59",
        "0001-01-01T00:00:00+05:00",
        "9999-12-31T23:59:59.999999-01:00",
        "2026-11-30 01:02:03Z",
        "2026-11-30T01:02:03",
        "2026-11-30",
        "2026-11-30T01:02:03.1234567Z",
    ]
)
ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:-]{0,130}\Z")
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "schema_version": st.sampled_from([1, 2]),
    "event_id": uuid_texts,
    "occurred_at": moments,
    "tenant_id": ids,
    "site_id": ids,
    "device_id": ids,
    "action": st.from_regex(r"\A[a-z][a-z0-9_]{0,8}(\.[a-z][a-z0-9_]{0,8}){0,7}\Z"),
    "actor": st.from_regex(r"\A[A-Za-z0-9._:@-]{1,130}\Z"),
    "changed_fields": st.lists(st.from_regex(r"\A[a-z][a-z0-9_]{0,65}\Z"), max_size=66),
    "config_version": st.integers(min_value=-1, max_value=2**63),
    "correlation_id": st.none() | ids,
}


@st.composite
def near_contract_items(draw: st.DrawFn) -> object:
    if draw(st.integers(0, 20)) == 0:
        return draw(json_values)
    item: dict[str, Any] = {}
    for name, valid in FIELDS.items():
        choice = draw(st.integers(0, 12))
        if choice == 0:
            continue  # dropped
        item[name] = draw(json_values) if choice == 1 else draw(valid)
    extra = draw(st.dictionaries(st.text(max_size=4), json_values, max_size=1))
    return item | extra


@given(near_contract_items())
def test_validation_matches_the_reference(item: object) -> None:
    assert outcome(item) == reference(item)


@given(st.fixed_dictionaries(FIELDS))
def test_valid_looking_facts_match_the_reference(item: dict[str, Any]) -> None:
    assert outcome(item) == reference(item)
