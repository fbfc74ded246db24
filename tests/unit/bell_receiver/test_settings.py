"""bell-receiver refuses to start without its DSN, its relay keys and its issuer; several relay keys are
allowed. (The access-token settings' own limits are tested with the platform: tests/unit/platform.)"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import httpx
import pytest

from bell_receiver.settings import BellReceiverSettings
from tests.support.stack import private_file
from yovision_platform.errors import ConfigError
from yovision_platform.settings import load_settings

ISSUER = "https://id.example.com"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "BELL_KAFKA_BOOTSTRAP": "127.0.0.1:19092",
        "BELL_DATABASE_DSN_FILE": str(
            private_file(tmp_path / "dsn", "postgresql://bell_app:pw@127.0.0.1:5/db\n")
        ),
        "BELL_AUDIT_PUSH_KEY_FILES": json.dumps(
            {
                "relay-1": str(private_file(tmp_path / "k1", secrets.token_hex(32))),
                "relay-2": str(private_file(tmp_path / "k2", secrets.token_hex(32))),
            }
        ),
        "BELL_AUTH_ISSUER": ISSUER,
    }
    for name in [*values, "BELL_HTTP_HOST"]:
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def test_loads_a_ring_of_several_keys_and_listens_on_loopback(env: dict[str, str]) -> None:
    settings = load_settings(BellReceiverSettings)
    assert settings.audit_push_keyring.key_ids == ("relay-1", "relay-2")
    assert settings.audit_push_keyring.active_key_id is None
    assert settings.http_host == "127.0.0.1" and settings.http_port == 18083


@pytest.mark.parametrize(
    "missing",
    ["BELL_DATABASE_DSN_FILE", "BELL_AUDIT_PUSH_KEY_FILES", "BELL_AUTH_ISSUER"],
)
def test_refuses_to_start_without(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    monkeypatch.delenv(missing)
    with pytest.raises(ConfigError) as refused:
        load_settings(BellReceiverSettings)
    assert missing in refused.value.settings


@pytest.mark.parametrize(
    ("value", "reason"),
    [("{}", "too_short"), ('{"bad key": "/x"}', "key_id_malformed"), ("not json", "unparseable")],
)
def test_refuses_a_bad_key_ring(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, value: str, reason: str
) -> None:
    monkeypatch.setenv("BELL_AUDIT_PUSH_KEY_FILES", value)
    with pytest.raises(ConfigError) as refused:
        load_settings(BellReceiverSettings)
    assert [p.reason for p in refused.value.problems] == [reason]


def test_a_short_relay_key_is_refused_without_printing_it(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    short = secrets.token_hex(31)
    monkeypatch.setenv(
        "BELL_AUDIT_PUSH_KEY_FILES", json.dumps({"relay-1": str(private_file(tmp_path / "s", short))})
    )
    with pytest.raises(ConfigError) as refused:
        load_settings(BellReceiverSettings)
    assert "BELL_AUDIT_PUSH_KEY_FILES[relay-1]" in str(refused.value) and short not in str(refused.value)


async def test_the_read_apis_take_the_issuers_access_tokens_for_the_bell_receiver_audience(
    env: dict[str, str],
) -> None:
    settings = load_settings(BellReceiverSettings)
    async with httpx.AsyncClient() as http:
        verifier = settings.access_token_verifier(http)
    assert (verifier.issuer, verifier.audience) == (ISSUER, "bell-receiver")
    assert verifier.keys.url == f"{ISSUER}/.well-known/jwks.json"


def test_the_former_name_of_the_audit_push_key_files_is_read_until_the_next_release(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BELL_AUDIT_PUSH_KEY_FILES")
    monkeypatch.setenv("BELL_RELAY_KEY_FILES", env["BELL_AUDIT_PUSH_KEY_FILES"])
    assert load_settings(BellReceiverSettings).audit_push_keyring.key_ids == ("relay-1", "relay-2")
