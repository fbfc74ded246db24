"""Schema evolution rules, proven on generated data.

- Against the committed version (``git show HEAD:<path>``), each changed schema must be FULL compatible:
  the new reader reads the old writer's data (backward) and the old reader reads the new writer's data
  (forward), because producers and consumers of a topic deploy independently. A file that is new, or a
  repository without a commit, has nothing to compare: those tests skip and say so.
- Against every released copy in ``_released/`` the current reader must read the old data (backward,
  transitive), because ``AvroSerde.decode`` resolves those writers to the current reader.
- The machinery itself is proven on a throw-away git repository.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.contract._compat import check_can_read
from tests.contract.conftest import SCHEMAS_DIR
from yovision_platform.messaging import (
    AvroSerde,
    SchemaRegistry,
    build_schema_versions,
    read_schema_documents,
)
from yovision_platform.tools.schema_lock import apply_lock, plan_lock, read_documents_at_revision

CURRENT_FULL_NAMES = sorted(build_schema_versions(read_schema_documents(SCHEMAS_DIR)))


@pytest.fixture(scope="module")
def committed_registry() -> SchemaRegistry | None:
    documents = read_documents_at_revision(SCHEMAS_DIR, "HEAD")
    if documents is None:
        return None
    return SchemaRegistry(build_schema_versions(documents)) if documents else SchemaRegistry({})


@pytest.mark.parametrize("full_name", CURRENT_FULL_NAMES)
def test_the_current_schema_is_fully_compatible_with_its_committed_version(
    full_name: str, registry: SchemaRegistry, committed_registry: SchemaRegistry | None
) -> None:
    if committed_registry is None:
        pytest.skip("no HEAD commit: nothing released to compare with")
    committed = committed_registry.current(full_name)
    if committed is None:
        pytest.skip(f"{full_name} is new (not at HEAD): nothing to compare with")
    current = registry.current(full_name)
    assert current is not None
    check_can_read(writer=committed, reader=current)  # backward
    check_can_read(writer=current, reader=committed)  # forward


def test_the_current_readers_read_every_released_version(registry: SchemaRegistry) -> None:
    for released in registry.released_versions():
        current = registry.current(released.full_name)
        assert current is not None, f"{released.full_name} was released but has no current schema"
        check_can_read(writer=released, reader=current)


# --- the machinery, on a throw-away repository -------------------------------------------------------

SMOKE = "platform/SmokeTestEvent.avsc"
ENVELOPE = "platform/EventEnvelope.avsc"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=contract-test", "-c", "user.email=contract-test@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def scratch_schemas(tmp_path: Path) -> Path:
    """A git repository holding the envelope and SmokeTestEvent, committed once."""
    schemas = tmp_path / "schemas" / "avro"
    for relative in (ENVELOPE, SMOKE):
        (schemas / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SCHEMAS_DIR / relative, schemas / relative)
    _git(tmp_path, "init", "--quiet")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "--quiet", "--no-verify", "-m", "v1")
    return schemas


def _add_field(schemas: Path, field: dict[str, object]) -> None:
    path = schemas / SMOKE
    document = json.loads(path.read_text())
    document["fields"].append(field)
    path.write_text(json.dumps(document, indent=2))


def _versions(schemas: Path) -> tuple[SchemaRegistry, SchemaRegistry]:
    committed = read_documents_at_revision(schemas)
    assert committed is not None
    return SchemaRegistry(build_schema_versions(committed)), SchemaRegistry.load(schemas)


SMOKE_FULL_NAME = "com.yovision.events.platform.SmokeTestEvent"


def test_adding_a_field_with_a_default_is_fully_compatible(scratch_schemas: Path) -> None:
    _add_field(scratch_schemas, {"name": "attempt", "type": "int", "default": 1})
    old, new = _versions(scratch_schemas)
    check_can_read(writer=old.for_event_type("SmokeTestEvent"), reader=new.for_event_type("SmokeTestEvent"))
    check_can_read(writer=new.for_event_type("SmokeTestEvent"), reader=old.for_event_type("SmokeTestEvent"))


def test_adding_a_field_without_a_default_breaks_backward_compatibility(scratch_schemas: Path) -> None:
    _add_field(scratch_schemas, {"name": "attempt", "type": "int"})
    old, new = _versions(scratch_schemas)
    with pytest.raises(AssertionError, match="cannot read"):
        check_can_read(
            writer=old.for_event_type("SmokeTestEvent"), reader=new.for_event_type("SmokeTestEvent")
        )


def test_removing_a_required_field_breaks_forward_compatibility(scratch_schemas: Path) -> None:
    path = scratch_schemas / SMOKE
    document = json.loads(path.read_text())
    document["fields"] = [f for f in document["fields"] if f["name"] != "produced_by"]
    path.write_text(json.dumps(document))
    old, new = _versions(scratch_schemas)
    check_can_read(writer=old.for_event_type("SmokeTestEvent"), reader=new.for_event_type("SmokeTestEvent"))
    with pytest.raises(AssertionError, match="cannot read"):
        check_can_read(
            writer=new.for_event_type("SmokeTestEvent"), reader=old.for_event_type("SmokeTestEvent")
        )


def test_schema_lock_archives_the_committed_version_so_its_messages_still_decode(
    scratch_schemas: Path,
) -> None:
    old_registry = SchemaRegistry.load(scratch_schemas)
    old_message = AvroSerde(old_registry).encode(
        "SmokeTestEvent",
        {
            "envelope": {
                "event_id": "00000000-0000-4000-8000-000000000001",
                "event_type": "SmokeTestEvent",
                "source_system": "platform",
                "aggregate_id": "run-1",
                "occurred_at": 1,
                "schema_version": 1,
            },
            "run_id": "run-1",
            "produced_by": "test",
        },
    )
    _add_field(scratch_schemas, {"name": "attempt", "type": "int", "default": 1})

    plan = plan_lock(scratch_schemas)
    assert plan.committed_available
    archived = [version.full_name for version in plan.archive.values()]
    assert archived == [SMOKE_FULL_NAME]
    apply_lock(plan, scratch_schemas)
    assert not plan_lock(scratch_schemas).changes_pending

    new_registry = SchemaRegistry.load(scratch_schemas)
    decoded = AvroSerde(new_registry).decode(old_message)
    assert decoded.record["attempt"] == 1
    assert decoded.writer_fingerprint == old_registry.for_event_type("SmokeTestEvent").fingerprint_hex
    locked = json.loads((scratch_schemas / "fingerprints.json").read_text())
    assert locked["schemas"][SMOKE_FULL_NAME]["released"] == [decoded.writer_fingerprint]


def test_changing_the_envelope_archives_every_event_that_embeds_it(scratch_schemas: Path) -> None:
    path = scratch_schemas / ENVELOPE
    document = json.loads(path.read_text())
    document["fields"].append({"name": "tenant_hint", "type": ["null", "string"], "default": None})
    path.write_text(json.dumps(document))
    archived = sorted(v.full_name for v in plan_lock(scratch_schemas).archive.values())
    assert archived == ["com.yovision.events.platform.EventEnvelope", SMOKE_FULL_NAME]


def test_a_directory_outside_any_commit_has_nothing_to_compare(tmp_path: Path) -> None:
    assert read_documents_at_revision(tmp_path) is None
