"""Stable error codes of the serde, and decoding of messages written with an older schema version."""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from tests.contract.conftest import load_sample
from yovision_platform.errors import PlatformError
from yovision_platform.messaging import (
    SINGLE_OBJECT_MAGIC,
    AvroSerde,
    DecodeError,
    InvalidEventError,
    SchemaRegistry,
    UnknownEventTypeError,
    build_schema_versions,
)

EVENT_TYPE = "DeviceRegistered"


def test_an_unknown_fingerprint_is_reported_as_unknown_schema(serde: AvroSerde) -> None:
    encoded = serde.encode(EVENT_TYPE, load_sample(EVENT_TYPE))
    tampered = SINGLE_OBJECT_MAGIC + bytes(8) + encoded[10:]
    with pytest.raises(DecodeError) as raised:
        serde.decode(tampered)
    assert raised.value.code == "unknown_schema"


@pytest.mark.parametrize("data", [b"", b"\xc3", b"\xc3\x01\x00", b'{"json": true}', b"\x00\x01" + bytes(20)])
def test_bytes_without_the_single_object_marker_are_not_single_object(serde: AvroSerde, data: bytes) -> None:
    with pytest.raises(DecodeError) as raised:
        serde.decode(data)
    assert raised.value.code == "not_single_object"


def test_truncated_or_trailing_bytes_are_malformed(serde: AvroSerde) -> None:
    encoded = serde.encode(EVENT_TYPE, load_sample(EVENT_TYPE))
    for broken in (encoded[:-1], encoded + b"\x00"):
        with pytest.raises(DecodeError) as raised:
            serde.decode(broken)
        assert raised.value.code == "malformed_event"


def test_corrupted_bodies_raise_only_decode_errors(serde: AvroSerde) -> None:
    encoded = bytearray(serde.encode(EVENT_TYPE, load_sample(EVENT_TYPE)))
    rng = random.Random(20251130)
    for _ in range(2000):
        corrupted = bytearray(encoded)
        for _ in range(rng.randint(1, 4)):
            corrupted[rng.randrange(10, len(corrupted))] = rng.randrange(256)
        data = bytes(corrupted[: rng.randrange(10, len(corrupted) + 1)])
        with contextlib.suppress(DecodeError):  # a corruption may still decode; it must never crash
            serde.decode(data)


def test_decode_errors_are_platform_errors_with_a_stable_code(serde: AvroSerde) -> None:
    with pytest.raises(PlatformError) as raised:
        serde.decode(b"nope")
    assert raised.value.code == "not_single_object"


def test_an_invalid_field_is_named_without_its_value(serde: AvroSerde) -> None:
    sample = load_sample(EVENT_TYPE)
    sample["config_version"] = "secret-looking-value"
    with pytest.raises(InvalidEventError) as raised:
        serde.encode(EVENT_TYPE, sample)
    assert raised.value.code == "invalid_event"
    assert raised.value.field == "config_version"
    assert "secret-looking-value" not in str(raised.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: r.pop("name"), "name"),
        (lambda r: r.update(source_uri="rtsp://user:pw@cam"), "source_uri"),
        (lambda r: r["envelope"].update(event_id="not-a-uuid"), "envelope.event_id"),
        (lambda r: r["envelope"].update(event_type="DeviceConfigChanged"), "envelope.event_type"),
        (lambda r: r["envelope"].update(schema_version=2**31), "envelope.schema_version"),
        (lambda r: r["envelope"].update(correlation_id=5), "envelope.correlation_id"),
        (lambda r: r.update(config_version=True), "config_version"),
    ],
)
def test_encode_rejects_records_that_break_the_schema(
    serde: AvroSerde, change: Callable[[dict[str, Any]], object], field: str
) -> None:
    record = load_sample(EVENT_TYPE)
    change(record)
    with pytest.raises(InvalidEventError) as raised:
        serde.encode(EVENT_TYPE, record)
    assert raised.value.field == field
    assert "rtsp://" not in str(raised.value)


def test_optional_envelope_fields_may_be_omitted(serde: AvroSerde) -> None:
    record = load_sample(EVENT_TYPE)
    del record["envelope"]["correlation_id"], record["envelope"]["causation_id"]
    decoded = serde.decode(serde.encode(EVENT_TYPE, record))
    assert decoded.envelope["correlation_id"] is None


def test_an_unknown_event_type_is_refused(serde: AvroSerde) -> None:
    with pytest.raises(UnknownEventTypeError) as raised:
        serde.encode("DeviceExploded", load_sample(EVENT_TYPE))
    assert raised.value.code == "unknown_event_type"


Fields = list[dict[str, Any]]


def _registry(fields: Fields, released: list[Fields] | None = None) -> SchemaRegistry:
    def document(fields: Fields) -> str:
        return json.dumps({"type": "record", "name": "Thing", "namespace": "t", "fields": fields})

    current = build_schema_versions({"t/Thing.avsc": document(fields)})
    old = [v for f in (released or []) for v in build_schema_versions({"t/Thing.avsc": document(f)}).values()]
    return SchemaRegistry(current, old)


V1: Fields = [{"name": "id", "type": "string"}]
V2: Fields = [*V1, {"name": "color", "type": "string", "default": "blue"}]


def test_a_message_of_a_released_older_writer_decodes_with_the_current_reader() -> None:
    old_writer = AvroSerde(_registry(V1))
    new_reader = AvroSerde(_registry(V2, released=[V1]))
    decoded = new_reader.decode(old_writer.encode("Thing", {"id": "a"}))
    assert decoded.record == {"id": "a", "color": "blue"}
    assert decoded.writer_fingerprint != new_reader.registry.for_event_type("Thing").fingerprint_hex


def test_a_message_of_an_older_writer_that_was_never_released_is_unknown_schema() -> None:
    old_writer = AvroSerde(_registry(V1))
    with pytest.raises(DecodeError) as raised:
        AvroSerde(_registry(V2)).decode(old_writer.encode("Thing", {"id": "a"}))
    assert raised.value.code == "unknown_schema"


def test_an_incompatible_reader_is_reported_as_schema_incompatible() -> None:
    writer = AvroSerde(_registry(V1))
    reader = AvroSerde(_registry([*V1, {"name": "size", "type": "int"}], released=[V1]))
    with pytest.raises(DecodeError) as raised:
        reader.decode(writer.encode("Thing", {"id": "a"}))
    assert raised.value.code == "schema_incompatible"
