"""The producer boundary: envelopes and EventRecords built from the catalogue."""

from __future__ import annotations

import time
import uuid

import pytest

from yovision_platform.messaging import (
    AvroSerde,
    EventCatalog,
    InvalidEventError,
    UnknownEventTypeError,
    build_event,
    catalog_for,
    new_envelope,
)

DEVICE_PAYLOAD = {
    "device_id": "dev-1",
    "tenant_id": "tenant-a",
    "site_id": "site-1",
    "name": "Gate",
    "path_name": "tenant-a-site-1-dev-1",
    "desired_state": "enabled",
    "config_version": 1,
}


def test_a_new_envelope_has_a_random_uuid4_and_the_current_time_in_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    envelope = new_envelope("DeviceRegistered", "sense", "dev-1")
    after = time.time_ns() // 1_000_000
    assert uuid.UUID(envelope["event_id"]).version == 4
    assert before <= envelope["occurred_at"] <= after
    assert envelope["correlation_id"] is None
    assert envelope["causation_id"] is None
    assert new_envelope("DeviceRegistered", "sense", "dev-1")["event_id"] != envelope["event_id"]


def test_a_new_envelope_refuses_an_unknown_source_system() -> None:
    with pytest.raises(InvalidEventError) as raised:
        new_envelope("DeviceRegistered", "brain", "dev-1")
    assert raised.value.field == "envelope.source_system"


def test_build_event_fills_topic_key_and_headers_from_the_catalogue(serde: AvroSerde) -> None:
    record = build_event(serde, "DeviceRegistered", "dev-1", DEVICE_PAYLOAD, "sense", correlation_id="req-1")
    assert record.topic == "sense.device.v1"
    assert record.key == b"dev-1"
    assert record.event_type == "DeviceRegistered"
    assert record.source_system == "sense"
    assert dict(record.headers) == {
        "event_type": b"DeviceRegistered",
        "event_id": str(record.event_id).encode(),
        "source_system": b"sense",
    }
    assert dict(record.text_headers)["event_id"] == str(record.event_id)
    decoded = serde.decode(record.value)
    assert decoded.event_id == str(record.event_id)
    assert decoded.envelope["aggregate_id"] == "dev-1"
    assert decoded.envelope["correlation_id"] == "req-1"
    assert decoded.envelope["schema_version"] == catalog_for(serde).entry("DeviceRegistered").schema_version


def test_build_event_refuses_a_source_system_that_does_not_own_the_event(serde: AvroSerde) -> None:
    with pytest.raises(InvalidEventError) as raised:
        build_event(serde, "DeviceRegistered", "dev-1", DEVICE_PAYLOAD, "media")
    assert raised.value.field == "envelope.source_system"


def test_build_event_refuses_a_key_field_that_differs_from_the_aggregate_id(serde: AvroSerde) -> None:
    with pytest.raises(InvalidEventError) as raised:
        build_event(serde, "DeviceRegistered", "dev-2", DEVICE_PAYLOAD, "sense")
    assert raised.value.field == "device_id"


def test_build_event_refuses_a_payload_that_brings_its_own_envelope(serde: AvroSerde) -> None:
    with pytest.raises(InvalidEventError) as raised:
        build_event(serde, "DeviceRegistered", "dev-1", {**DEVICE_PAYLOAD, "envelope": {}}, "sense")
    assert raised.value.field == "envelope"


def test_build_event_refuses_an_event_type_outside_the_catalogue(serde: AvroSerde) -> None:
    with pytest.raises(UnknownEventTypeError):
        build_event(serde, "EventEnvelope", "x", {}, "platform")


def test_build_event_reports_schema_violations_by_field(serde: AvroSerde, catalog: EventCatalog) -> None:
    with pytest.raises(InvalidEventError) as raised:
        build_event(serde, "DeviceRegistered", "dev-1", {**DEVICE_PAYLOAD, "config_version": "1"}, "sense")
    assert raised.value.field == "config_version"


def test_the_source_system_is_the_catalogue_owner_when_not_given(
    serde: AvroSerde, catalog: EventCatalog
) -> None:
    record = build_event(serde, "DeviceRegistered", "dev-1", DEVICE_PAYLOAD)
    assert record.source_system == catalog.source_system_of("DeviceRegistered") == "sense"
    assert dict(record.headers)["source_system"] == b"sense"
