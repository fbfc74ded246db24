"""Fingerprints: fastavro and our registry agree with an implementation written from the Avro spec, and
fingerprints.json / _released/ are in sync with the schemas."""

from __future__ import annotations

import json

import pytest
from fastavro.schema import to_parsing_canonical_form

from tests.contract._avro_oracle import crc64_avro, parsing_canonical_form, single_object_fingerprint
from tests.contract.conftest import SCHEMAS_DIR
from yovision_platform.messaging import (
    SchemaRegistry,
    load_released_versions,
    read_released_documents,
    schema_fingerprint,
)
from yovision_platform.tools.schema_lock import FINGERPRINTS_FILE_NAME, plan_lock

# (input schema, canonical form, fingerprint as the signed long Java prints) from the Avro project's
# share/test/data/schema-tests.txt.
SPEC_VECTORS = [
    ('"null"', '"null"', 7195948357588979594),
    ('{"type":"boolean"}', '"boolean"', -6970731678124411036),
    ('"int"', '"int"', 8247732601305521295),
    ('"long"', '"long"', -3434872931120570953),
    ('"string"', '"string"', -8142146995180207161),
    ('[ "int" , {"type":"boolean"} ]', '["int","boolean"]', 5392556393470105090),
    (
        '{"fields":[], "type":"record", "name":"foo"}',
        '{"name":"foo","type":"record","fields":[]}',
        -4824392279771201922,
    ),
    (
        '{"fields":[], "type":"record", "name":"foo", "namespace":"x.y"}',
        '{"name":"x.y.foo","type":"record","fields":[]}',
        5916914534497305771,
    ),
    (
        '{"fields":[], "type":"record", "name":"a.b.foo", "namespace":"x.y"}',
        '{"name":"a.b.foo","type":"record","fields":[]}',
        -4616218487480524110,
    ),
    (
        '{"fields":[{"type":{"type":"boolean"}, "name":"f1"}], "type":"record", "name":"foo"}',
        '{"name":"foo","type":"record","fields":[{"name":"f1","type":"boolean"}]}',
        7843277075252814651,
    ),
    (
        '{"namespace":"x.y.z", "type":"enum", "name":"foo", "doc":"foo bar", "symbols":["A1", "A2"]}',
        '{"name":"x.y.z.foo","type":"enum","symbols":["A1","A2"]}',
        -4448647247586288245,
    ),
    (
        '{"name":"foo","type":"fixed","size":15}',
        '{"name":"foo","type":"fixed","size":15}',
        1756455273707447556,
    ),
    ('{ "items":{"type":"null"}, "type":"array"}', '{"type":"array","items":"null"}', -589620603366471059),
    ('{ "values":"string", "type":"map"}', '{"type":"map","values":"string"}', -8732877298790414990),
    (
        '{"name":"PigValue","type":"record",'
        ' "fields":[{"name":"value", "type":["null", "int", "long", "PigValue"]}]}',
        '{"name":"PigValue","type":"record","fields":[{"name":"value","type":["null","int","long","PigValue"]}]}',
        -1759257747318642341,
    ),
]
UNSIGNED_64 = (1 << 64) - 1


@pytest.mark.parametrize(("schema_text", "canonical", "signed_fingerprint"), SPEC_VECTORS)
def test_the_spec_algorithm_and_fastavro_reproduce_the_avro_test_vectors(
    schema_text: str, canonical: str, signed_fingerprint: int
) -> None:
    schema = json.loads(schema_text)
    assert parsing_canonical_form(schema) == canonical
    assert crc64_avro(canonical.encode()) == signed_fingerprint & UNSIGNED_64
    assert to_parsing_canonical_form(schema) == canonical
    assert schema_fingerprint(canonical) == (signed_fingerprint & UNSIGNED_64).to_bytes(8, "little")


def test_every_schema_has_the_canonical_form_and_fingerprint_the_spec_prescribes(
    registry: SchemaRegistry,
) -> None:
    definitions = {
        name: json.loads((SCHEMAS_DIR / version.source).read_text(encoding="utf-8"))
        for name, version in registry.current_versions().items()
    }
    for name, version in registry.current_versions().items():
        expected_form = parsing_canonical_form(definitions[name], definitions)
        assert version.canonical_form == expected_form, name
        assert version.fingerprint == single_object_fingerprint(expected_form), name


def test_fingerprints_json_and_released_copies_are_up_to_date() -> None:
    plan = plan_lock(SCHEMAS_DIR)
    assert not plan.changes_pending, (
        "schema fingerprints changed: run `python -m yovision_platform.tools.schema_lock` "
        f"(would archive {sorted(plan.archive)}, update fingerprints.json: {plan.fingerprints_changed})"
    )


def test_every_released_fingerprint_in_fingerprints_json_has_a_released_schema_copy(
    registry: SchemaRegistry,
) -> None:
    locked = json.loads((SCHEMAS_DIR / FINGERPRINTS_FILE_NAME).read_text(encoding="utf-8"))
    assert locked["algorithm"] == "CRC-64-AVRO"
    released = {
        (v.full_name, v.fingerprint_hex) for v in load_released_versions(read_released_documents(SCHEMAS_DIR))
    }
    listed = {(name, fp) for name, entry in locked["schemas"].items() for fp in entry["released"]}
    assert listed == released
    for full_name, entry in locked["schemas"].items():
        current = registry.current(full_name)
        assert entry["current"] == (current.fingerprint_hex if current else None)
        for fingerprint_hex in entry["released"]:
            assert registry.find_by_fingerprint(bytes.fromhex(fingerprint_hex)) is not None
