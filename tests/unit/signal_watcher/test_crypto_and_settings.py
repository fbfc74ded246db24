from __future__ import annotations

import os
from pathlib import Path

import pytest

from signal_watcher.adapters.crypto import AES_KEY_BYTES, SecretCipher, SecretUnreadable
from signal_watcher.domain.model import Header
from signal_watcher.domain.ssrf import STRICT_GUARD
from signal_watcher.settings import (
    DEFAULT_CHECK_RETENTION_DAYS,
    SignalWatcherSettings,
    effective_retention_days,
)
from yovision_platform.errors import ConfigError
from yovision_platform.settings import load_settings
from yovision_platform.tools.localhost import write_private_file


def test_headers_and_body_round_trip_and_are_not_plaintext() -> None:
    cipher = SecretCipher(os.urandom(AES_KEY_BYTES))
    headers = (Header("Authorization", "Bearer abc"), Header("X-A", "1"))
    stored = cipher.encrypt_headers(headers, watcher_id="w1")
    assert b"Bearer abc" not in stored and b"Authorization" not in stored
    assert cipher.decrypt_headers(stored, watcher_id="w1") == headers
    assert cipher.decrypt_body(cipher.encrypt_body("pw=1", watcher_id="w1"), watcher_id="w1") == "pw=1"
    assert cipher.encrypt_body("same", watcher_id="w1") != cipher.encrypt_body("same", watcher_id="w1")


def test_ciphertext_is_bound_to_its_watcher_field_and_key() -> None:
    cipher = SecretCipher(os.urandom(AES_KEY_BYTES))
    stored = cipher.encrypt_body("secret", watcher_id="w1")
    with pytest.raises(SecretUnreadable):
        cipher.decrypt_body(stored, watcher_id="w2")
    with pytest.raises(SecretUnreadable):
        cipher.decrypt_headers(stored, watcher_id="w1")
    with pytest.raises(SecretUnreadable):
        SecretCipher(os.urandom(AES_KEY_BYTES)).decrypt_body(stored, watcher_id="w1")


@pytest.mark.parametrize("length", [AES_KEY_BYTES - 1, AES_KEY_BYTES + 1, 0])
def test_only_32_byte_keys_are_accepted(length: int) -> None:
    with pytest.raises(ValueError, match="exactly 32 bytes"):
        SecretCipher(os.urandom(length))


@pytest.mark.parametrize(("configured", "effective"), [(90, 90), (1, 1), (365, 365), (0, 90), (-5, 90)])
def test_non_positive_retention_falls_back_to_90_days(configured: int, effective: int) -> None:
    assert DEFAULT_CHECK_RETENTION_DAYS == 90
    assert effective_retention_days(configured) == effective


def _settings_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, networks: str | None) -> None:
    for name, value in {
        "SIGNAL_KAFKA_BOOTSTRAP": "127.0.0.1:9092",
        "SIGNAL_DATABASE_DSN_FILE": str(
            write_private_file(tmp_path / "dsn", "postgresql://signal_app:pw@127.0.0.1:5432/db\n")
        ),
        "SIGNAL_SECRETS_AES_KEY_FILE": str(write_private_file(tmp_path / "aes", os.urandom(32).hex())),
        "SIGNAL_AUTH_JWT_KEY_FILE": str(write_private_file(tmp_path / "jwt", os.urandom(32).hex())),
        "SIGNAL_AUTH_JWT_ISSUER": "test",
    }.items():
        monkeypatch.setenv(name, value)
    if networks is None:
        monkeypatch.delenv("SIGNAL_PROBE_ALLOWED_NETWORKS", raising=False)
    else:
        monkeypatch.setenv("SIGNAL_PROBE_ALLOWED_NETWORKS", networks)


def test_the_probe_guard_is_strict_unless_networks_are_allow_listed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _settings_env(monkeypatch, tmp_path, None)
    assert load_settings(SignalWatcherSettings).probe_guard == STRICT_GUARD
    _settings_env(monkeypatch, tmp_path, "127.0.0.0/8, 192.168.50.0/24")
    guard = load_settings(SignalWatcherSettings).probe_guard
    assert [str(n) for n in guard.allowed_networks] == ["127.0.0.0/8", "192.168.50.0/24"]


@pytest.mark.parametrize("networks", ["127.0.0.1/8", "127.0.0.0/8,not-a-net", "127.0.0.1", '["10.0.0.0/8"]'])
def test_malformed_allowed_networks_refuse_start_up_without_echoing_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, networks: str
) -> None:
    _settings_env(monkeypatch, tmp_path, networks)
    with pytest.raises(ConfigError) as exc:
        load_settings(SignalWatcherSettings)
    assert exc.value.settings == ("SIGNAL_PROBE_ALLOWED_NETWORKS",)
    assert networks not in str(exc.value)
