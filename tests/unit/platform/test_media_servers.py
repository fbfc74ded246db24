"""Registering MediaMTX servers: the fleet form, the single-server form, ids, credentials files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic_settings import SettingsConfigDict

from yovision_platform.errors import ConfigError
from yovision_platform.mediamtx import (
    SINGLE_MEDIA_SERVER_ID,
    MediaFleet,
    MediaMtxApi,
    MediaMtxError,
    MediaServerSettings,
)
from yovision_platform.settings import Port, load_settings
from yovision_platform.tools.localhost import write_private_file


class FleetSettings(MediaServerSettings):
    model_config = SettingsConfigDict(
        env_prefix="TST_", extra="forbid", frozen=True, hide_input_in_errors=True
    )
    http_port: Port = 18999


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("TST_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TST_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    dsn = write_private_file(tmp_path / "dsn", "postgresql://app:pw@127.0.0.1:5432/db\n")
    monkeypatch.setenv("TST_DATABASE_DSN_FILE", str(dsn))


def refused(monkeypatch: pytest.MonkeyPatch, **env: str) -> ConfigError:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        load_settings(FleetSettings)
    return caught.value


def test_the_single_server_form_registers_the_default_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TST_MEDIAMTX_API_URL", "http://127.0.0.1:19997/")
    (server,) = load_settings(FleetSettings).media_server_list
    assert (server.id, server.api_url, server.credentials) == (
        SINGLE_MEDIA_SERVER_ID,
        "http://127.0.0.1:19997",
        None,
    )


def test_the_fleet_form_reads_each_servers_credentials(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    credentials = write_private_file(tmp_path / "mtx-b", "sense:s3cret-pw\n")
    servers = {
        "mtx-b": {"api_url": "http://10.0.0.2:9997", "credentials_file": str(credentials)},
        "mtx-a": {"api_url": "https://mtx-a.example:9997"},
    }
    monkeypatch.setenv("TST_MEDIA_SERVERS", json.dumps(servers))
    settings = load_settings(FleetSettings)
    a, b = settings.media_server_list
    assert (a.id, a.credentials, b.id) == ("mtx-a", None, "mtx-b")
    assert b.credentials is not None and b.credentials.user == "sense"
    assert b.credentials.password.get_secret_value() == "s3cret-pw"
    assert "s3cret" not in repr(b) and settings.media_server_ids == {"mtx-a", "mtx-b"}


def test_neither_or_both_forms_refuse_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    assert refused(monkeypatch).settings
    both = refused(
        monkeypatch,
        TST_MEDIAMTX_API_URL="http://127.0.0.1:1",
        TST_MEDIA_SERVERS='{"a": {"api_url": "http://127.0.0.1:2"}}',
    )
    assert both.settings


@pytest.mark.parametrize("server_id", ["", "A", "-a", "a_b", "a" * 33, "mtx.1"])
def test_server_ids_are_validated(monkeypatch: pytest.MonkeyPatch, server_id: str) -> None:
    error = refused(monkeypatch, TST_MEDIA_SERVERS=json.dumps({server_id: {"api_url": "http://h:1"}}))
    assert error.settings == ("TST_MEDIA_SERVERS",)


@pytest.mark.parametrize("url", ["http://user:pw@h:1", "ftp://h:1", "http://h:1/?token=x"])
def test_server_urls_carry_no_credentials_or_query(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    error = refused(monkeypatch, TST_MEDIA_SERVERS=json.dumps({"a": {"api_url": url}}))
    assert error.settings[0].startswith("TST_MEDIA_SERVERS") and "pw" not in str(error)


@pytest.mark.parametrize(("content", "reason"), [("no-colon", "credentials_malformed"), ("", "too_short")])
def test_a_bad_credentials_file_is_named_by_its_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str, reason: str
) -> None:
    path = write_private_file(tmp_path / "creds", content)
    error = refused(
        monkeypatch,
        TST_MEDIA_SERVERS=json.dumps({"mtx-a": {"api_url": "http://h:1", "credentials_file": str(path)}}),
    )
    assert error.settings == ("TST_MEDIA_SERVERS[mtx-a][credentials_file]",) and reason in str(error)
    assert "no-colon" not in str(error)


def test_a_world_readable_credentials_file_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "creds"
    path.write_text("u:p\n")
    path.chmod(0o644)
    error = refused(monkeypatch, TST_MEDIAMTX_API_URL="http://h:1", TST_MEDIAMTX_CREDENTIALS_FILE=str(path))
    assert error.settings == ("TST_MEDIAMTX_CREDENTIALS_FILE",) and "world_accessible" in str(error)


async def test_a_fleet_refuses_an_unregistered_server_with_a_stable_code() -> None:
    fleet = MediaFleet({"mtx-a": MediaMtxApi("http://127.0.0.1:9", deadline_seconds=1.0)})
    assert fleet.ids == ("mtx-a",) and "mtx-a" in fleet
    with pytest.raises(MediaMtxError) as raised:
        fleet.client("mtx-gone")
    assert raised.value.code == "media_server_not_registered"
    await fleet.aclose()
