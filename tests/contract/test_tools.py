"""The operator tools without a broker: output lines, bootstrap resolution, the schema lock CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.contract.conftest import SCHEMAS_DIR, load_sample
from yovision_platform.messaging import AvroSerde
from yovision_platform.tools import BOOTSTRAP_ENV, resolve_bootstrap
from yovision_platform.tools.consume import message_line, to_jsonable
from yovision_platform.tools.produce_smoke import build_smoke_event
from yovision_platform.tools.schema_lock import main as schema_lock_main


def test_a_decoded_message_prints_as_one_json_line(serde: AvroSerde) -> None:
    value = serde.encode("DeviceRegistered", load_sample("DeviceRegistered"))
    line = json.loads(message_line(serde, "sense.device.v1", 3, 17, b"dev-0001", value))
    assert line["partition"] == 3
    assert line["offset"] == 17
    assert line["key"] == "dev-0001"
    assert line["event_type"] == "DeviceRegistered"
    assert line["value"]["envelope"]["event_id"] == "00000000-0000-4000-8000-000000000001"
    assert line["value"]["envelope"]["occurred_at"] == "2025-11-30T00:00:00.001Z"


def test_an_undecodable_message_prints_its_stable_error_code(serde: AvroSerde) -> None:
    line = json.loads(message_line(serde, "t", 0, 1, None, b"plain text"))
    assert line == {"topic": "t", "partition": 0, "offset": 1, "key": None, "error": "not_single_object"}


def test_a_tombstone_prints_as_such(serde: AvroSerde) -> None:
    line = json.loads(message_line(serde, "t", 0, 2, b"k", None))
    assert line["tombstone"] is True


def test_timestamps_print_as_utc_iso_with_milliseconds() -> None:
    assert to_jsonable(datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)) == "2025-01-02T03:04:05.678Z"


def test_the_smoke_event_is_a_valid_platform_event(serde: AvroSerde) -> None:
    record = build_smoke_event(serde, note="hi")
    assert record.topic == "platform.smoke.v1"
    decoded = serde.decode(record.value)
    assert decoded.event_type == "SmokeTestEvent"
    assert decoded.record["run_id"] == record.key.decode()


def test_bootstrap_prefers_the_flag_then_the_environment_then_stack_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BOOTSTRAP_ENV, "env-host:1")
    assert resolve_bootstrap("flag-host:2") == "flag-host:2"
    assert resolve_bootstrap(None) == "env-host:1"
    monkeypatch.delenv(BOOTSTRAP_ENV)
    (tmp_path / ".local").mkdir()
    (tmp_path / ".local" / "stack.env").write_text("OTHER=1\nexport YOVISION_KAFKA_BOOTSTRAP='file-host:3'\n")
    monkeypatch.chdir(tmp_path)
    assert resolve_bootstrap(None) == "file-host:3"


def test_schema_lock_check_passes_on_the_repository() -> None:
    assert schema_lock_main(["--schemas-dir", str(SCHEMAS_DIR), "--check"]) == 0


def test_schema_lock_check_fails_when_fingerprints_json_is_stale(tmp_path: Path) -> None:
    schemas = tmp_path / "avro"
    (schemas / "platform").mkdir(parents=True)
    for name in ("EventEnvelope", "SmokeTestEvent"):
        (schemas / "platform" / f"{name}.avsc").write_text(
            (SCHEMAS_DIR / "platform" / f"{name}.avsc").read_text()
        )
    assert schema_lock_main(["--schemas-dir", str(schemas), "--check"]) == 1
    assert schema_lock_main(["--schemas-dir", str(schemas)]) == 0
    assert schema_lock_main(["--schemas-dir", str(schemas), "--check"]) == 0
