"""Every catalogued event type has a sample that validates, round-trips through single-object encoding and
decodes with the reader schema."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest
from fastavro.validation import validate

from tests.contract.conftest import SAMPLES_DIR, catalog_event_types, load_sample
from yovision_platform.messaging import (
    SINGLE_OBJECT_MAGIC,
    AvroSerde,
    EventCatalog,
    SchemaRegistry,
    build_event,
    first_invalid_field,
)

EVENT_TYPES = catalog_event_types()


def plain(value: Any) -> Any:
    """Decoded values back in the samples' JSON form: UUIDs as text, timestamps as epoch milliseconds."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return round(value.timestamp() * 1000)
    return value


def test_there_is_exactly_one_sample_per_catalogued_event_type() -> None:
    assert sorted(path.stem for path in SAMPLES_DIR.glob("*.json")) == EVENT_TYPES


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_the_sample_validates_against_its_schema(event_type: str, registry: SchemaRegistry) -> None:
    version = registry.for_event_type(event_type)
    sample = load_sample(event_type)
    assert first_invalid_field(version.parsed, sample) is None
    assert validate(sample, version.parsed, raise_errors=True)
    assert sample["envelope"]["event_type"] == event_type


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_the_sample_spells_out_every_field_of_its_schema(event_type: str, registry: SchemaRegistry) -> None:
    version = registry.for_event_type(event_type)
    sample = load_sample(event_type)
    assert list(sample) == [field["name"] for field in version.parsed["fields"]]
    envelope_fields = version.parsed["fields"][0]["type"]["fields"]
    assert list(sample["envelope"]) == [field["name"] for field in envelope_fields]


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_the_sample_round_trips_through_single_object_encoding(
    event_type: str, serde: AvroSerde, registry: SchemaRegistry
) -> None:
    sample = load_sample(event_type)
    encoded = serde.encode(event_type, sample)
    assert encoded[:2] == SINGLE_OBJECT_MAGIC
    assert encoded[2:10] == registry.for_event_type(event_type).fingerprint
    decoded = serde.decode(encoded)
    assert decoded.event_type == event_type
    assert plain(decoded.record) == sample
    assert decoded.event_id == sample["envelope"]["event_id"]
    assert decoded.source_system == sample["envelope"]["source_system"]


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_the_sample_decodes_with_the_explicit_reader_schema(event_type: str, serde: AvroSerde) -> None:
    sample = load_sample(event_type)
    decoded = serde.decode(serde.encode(event_type, sample), reader_event_type=event_type)
    assert plain(decoded.record) == sample


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_build_event_from_the_samples_payload_yields_the_same_event(
    event_type: str, serde: AvroSerde, catalog: EventCatalog
) -> None:
    sample = load_sample(event_type)
    envelope = sample["envelope"]
    payload = {key: value for key, value in sample.items() if key != "envelope"}
    record = build_event(
        serde,
        event_type,
        envelope["aggregate_id"],
        payload,
        envelope["source_system"],
        catalog=catalog,
        correlation_id=envelope["correlation_id"],
        causation_id=envelope["causation_id"],
        event_id=uuid.UUID(envelope["event_id"]),
        occurred_at_ms=envelope["occurred_at"],
    )
    assert record.value == serde.encode(event_type, sample)
    assert record.topic == catalog.entry(event_type).topic
    assert record.key == envelope["aggregate_id"].encode()
