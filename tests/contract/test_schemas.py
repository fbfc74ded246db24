"""Every schema file parses, is standalone once its references are resolved, and follows our layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.contract.conftest import SCHEMAS_DIR
from yovision_platform.messaging import (
    SCHEMAS_DIR_ENV,
    SOURCE_SYSTEMS,
    SchemaLoadError,
    SchemaRegistry,
    build_schema_versions,
    default_schemas_dir,
    read_schema_documents,
)

ENVELOPE_FULL_NAME = "com.yovision.events.platform.EventEnvelope"
ENVELOPE_FIELDS = [
    "event_id",
    "event_type",
    "source_system",
    "aggregate_id",
    "occurred_at",
    "schema_version",
    "correlation_id",
    "causation_id",
]


def test_every_schema_file_parses_into_the_registry(registry: SchemaRegistry) -> None:
    documents = read_schema_documents(SCHEMAS_DIR)
    assert documents, "no .avsc files found"
    assert sorted(v.source for v in registry.current_versions().values()) == sorted(documents)


def test_each_schema_file_is_named_after_its_record_and_lives_in_its_owners_namespace(
    registry: SchemaRegistry,
) -> None:
    for version in registry.current_versions().values():
        owner, file_name = version.source.split("/")
        assert owner in SOURCE_SYSTEMS
        assert file_name == f"{version.name}.avsc"
        assert version.full_name == f"com.yovision.events.{owner}.{version.name}"


def test_the_envelope_has_the_agreed_fields(registry: SchemaRegistry) -> None:
    envelope = registry.current(ENVELOPE_FULL_NAME)
    assert envelope is not None
    fields = {f["name"]: f for f in envelope.parsed["fields"]}
    assert list(fields) == ENVELOPE_FIELDS
    assert fields["event_id"]["type"] == {"type": "string", "logicalType": "uuid"}
    assert fields["occurred_at"]["type"] == {"type": "long", "logicalType": "timestamp-millis"}
    assert fields["source_system"]["type"] == "string", "a string, not an enum, for forward compatibility"
    assert fields["schema_version"]["type"] == "int"
    for optional in ("correlation_id", "causation_id"):
        assert fields[optional]["type"] == ["null", "string"]
        assert fields[optional]["default"] is None


def test_every_event_schema_starts_with_the_shared_envelope(registry: SchemaRegistry) -> None:
    for version in registry.current_versions().values():
        if version.full_name == ENVELOPE_FULL_NAME:
            continue
        raw = json.loads((SCHEMAS_DIR / version.source).read_text(encoding="utf-8"))
        first = raw["fields"][0]
        assert first["name"] == "envelope"
        assert first["type"] == ENVELOPE_FULL_NAME, "reference the shared envelope, never a copy"
        assert version.parsed["fields"][0]["type"]["name"] == ENVELOPE_FULL_NAME


def test_a_reference_to_an_undefined_type_is_a_load_error() -> None:
    documents = {
        "x/Broken.avsc": json.dumps(
            {
                "type": "record",
                "name": "Broken",
                "namespace": "com.yovision.events.x",
                "fields": [{"name": "envelope", "type": "com.yovision.events.platform.Missing"}],
            }
        )
    }
    with pytest.raises(SchemaLoadError) as raised:
        build_schema_versions(documents)
    assert raised.value.code == "unknown_named_type"


def test_a_file_that_is_not_a_named_type_is_a_load_error() -> None:
    with pytest.raises(SchemaLoadError) as raised:
        build_schema_versions({"x/Bad.avsc": '"string"'})
    assert raised.value.code == "schema_invalid"


def test_the_schemas_dir_is_found_from_the_package_or_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(SCHEMAS_DIR_ENV, raising=False)
    assert default_schemas_dir() == SCHEMAS_DIR
    monkeypatch.setenv(SCHEMAS_DIR_ENV, str(SCHEMAS_DIR.parent))
    assert default_schemas_dir() == SCHEMAS_DIR
    monkeypatch.setenv(SCHEMAS_DIR_ENV, str(SCHEMAS_DIR))
    assert default_schemas_dir() == SCHEMAS_DIR
    monkeypatch.setenv(SCHEMAS_DIR_ENV, str(tmp_path / "missing"))
    with pytest.raises(SchemaLoadError) as raised:
        default_schemas_dir()
    assert raised.value.code == "schemas_dir_not_found"
