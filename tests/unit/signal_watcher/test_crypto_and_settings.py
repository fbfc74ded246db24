from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from signal_watcher.adapters.crypto import AES_KEY_BYTES, SecretCipher, SecretUnreadable
from signal_watcher.domain.errors import NetworkConfined
from signal_watcher.domain.model import Header
from signal_watcher.domain.ssrf import STRICT_GUARD
from signal_watcher.settings import (
    AUDIENCE,
    DEFAULT_CHECK_RETENTION_DAYS,
    SignalWatcherSettings,
    effective_retention_days,
)
from tests.support.issuers import LocalIssuer
from yovision_platform.errors import ConfigError
from yovision_platform.security import EncryptionKeyRing
from yovision_platform.settings import load_settings
from yovision_platform.tools.environment import TEST_PROBE_ONLY_NETWORKS
from yovision_platform.tools.localhost import write_private_file

CONFINEMENT = "SIGNAL_PROBE_ONLY_NETWORKS"


def cipher_of() -> SecretCipher:
    return SecretCipher(EncryptionKeyRing({"k1": os.urandom(AES_KEY_BYTES)}, "k1"))


def test_headers_and_body_round_trip_and_are_not_plaintext() -> None:
    cipher = cipher_of()
    headers = (Header("Authorization", "Bearer abc"), Header("X-A", "1"))
    stored = cipher.encrypt_headers(headers, watcher_id="w1")
    assert b"Bearer abc" not in stored and b"Authorization" not in stored
    assert cipher.decrypt_headers(stored, watcher_id="w1") == headers
    assert cipher.decrypt_body(cipher.encrypt_body("pw=1", watcher_id="w1"), watcher_id="w1") == "pw=1"
    assert cipher.encrypt_body("same", watcher_id="w1") != cipher.encrypt_body("same", watcher_id="w1")


def test_ciphertext_is_bound_to_its_watcher_field_and_key() -> None:
    cipher = cipher_of()
    stored = cipher.encrypt_body("secret", watcher_id="w1")
    with pytest.raises(SecretUnreadable):
        cipher.decrypt_body(stored, watcher_id="w2")
    with pytest.raises(SecretUnreadable):
        cipher.decrypt_headers(stored, watcher_id="w1")
    with pytest.raises(SecretUnreadable):
        cipher_of().decrypt_body(stored, watcher_id="w1")


@pytest.mark.parametrize("length", [AES_KEY_BYTES - 1, AES_KEY_BYTES + 1, 0])
def test_only_32_byte_keys_are_accepted(length: int) -> None:
    with pytest.raises(ValueError, match="exactly 32 bytes"):
        EncryptionKeyRing({"k1": os.urandom(length)}, "k1")


@pytest.mark.parametrize(("configured", "effective"), [(90, 90), (1, 1), (365, 365), (0, 90), (-5, 90)])
def test_non_positive_retention_falls_back_to_90_days(configured: int, effective: int) -> None:
    assert DEFAULT_CHECK_RETENTION_DAYS == 90
    assert effective_retention_days(configured) == effective


def _settings_env(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    networks: str | None,
    *,
    only_networks: str | None = TEST_PROBE_ONLY_NETWORKS,
) -> None:
    """The settings env of these tests: confined as every test environment (`only_networks`), unless a test
    looks at the unconfined default (None)."""
    for name, value in {
        "SIGNAL_KAFKA_BOOTSTRAP": "127.0.0.1:9092",
        "SIGNAL_DATABASE_DSN_FILE": str(
            write_private_file(tmp_path / "dsn", "postgresql://signal_app:pw@127.0.0.1:5432/db\n")
        ),
        "SIGNAL_SECRETS_AES_KEY_FILE": str(write_private_file(tmp_path / "aes", os.urandom(32).hex())),
        "SIGNAL_AUTH_ISSUER": LocalIssuer.issuer,
    }.items():
        monkeypatch.setenv(name, value)
    for setting, given in (("SIGNAL_PROBE_ALLOWED_NETWORKS", networks), (CONFINEMENT, only_networks)):
        if given is None:
            monkeypatch.delenv(setting, raising=False)
        else:
            monkeypatch.setenv(setting, given)


def test_the_probe_guard_is_strict_unless_networks_are_allow_listed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _settings_env(monkeypatch, tmp_path, None, only_networks=None)
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


@pytest.mark.parametrize("unset", [None, "", "  "])
def test_probes_are_not_confined_unless_networks_are_listed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, unset: str | None
) -> None:
    _settings_env(monkeypatch, tmp_path, None, only_networks=unset)
    guard = load_settings(SignalWatcherSettings).probe_guard
    assert not guard.is_confined and guard == STRICT_GUARD


def test_listed_networks_confine_the_probe_guard_on_top_of_the_allow_list(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _settings_env(monkeypatch, tmp_path, "127.0.0.1/32")  # confined to TEST_PROBE_ONLY_NETWORKS
    guard = load_settings(SignalWatcherSettings).probe_guard
    assert [str(n) for n in guard.only_networks] == ["127.0.0.0/8", "::1/128"]
    assert [str(n) for n in guard.allowed_networks] == ["127.0.0.1/32"]
    with pytest.raises(NetworkConfined):
        guard.check(ipaddress.ip_address("93.184.216.34"))


@pytest.mark.parametrize("networks", ["127.0.0.1/8", "127.0.0.0/8,not-a-net", "127.0.0.1", "::1", "0/0"])
def test_malformed_confinement_networks_refuse_start_up_without_echoing_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, networks: str
) -> None:
    _settings_env(monkeypatch, tmp_path, None, only_networks=networks)
    with pytest.raises(ConfigError) as exc:
        load_settings(SignalWatcherSettings)
    assert exc.value.settings == (CONFINEMENT,)
    assert networks not in str(exc.value).replace(CONFINEMENT, "")


def test_the_key_from_before_the_ring_joins_it_as_legacy_and_reads_old_ciphertexts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _settings_env(monkeypatch, tmp_path, None)
    legacy = bytes.fromhex((tmp_path / "aes").read_text())
    nonce = os.urandom(12)
    before_the_ring = nonce + AESGCM(legacy).encrypt(nonce, b"pw=1", b"signal:watcher:w1:body")
    settings = load_settings(SignalWatcherSettings)
    assert settings.key_ring.active_key_id == "legacy"
    assert SecretCipher(settings.key_ring).decrypt_body(before_the_ring, watcher_id="w1") == "pw=1"
    new = write_private_file(tmp_path / "k2", os.urandom(32).hex())
    monkeypatch.setenv("SIGNAL_SECRETS_KEY_FILES", json.dumps({"k2": str(new)}))
    monkeypatch.setenv("SIGNAL_SECRETS_ACTIVE_KEY_ID", "k2")
    rotated = load_settings(SignalWatcherSettings)
    assert rotated.key_ring.key_ids == {"legacy", "k2"} and rotated.key_ring.active_key_id == "k2"
    cipher = SecretCipher(rotated.key_ring)
    assert cipher.decrypt_body(before_the_ring, watcher_id="w1") == "pw=1"
    assert rotated.key_ring.key_id_of(cipher.encrypt_body("x", watcher_id="w1")) == "k2"


def test_without_any_key_start_up_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _settings_env(monkeypatch, tmp_path, None)
    monkeypatch.delenv("SIGNAL_SECRETS_AES_KEY_FILE")
    with pytest.raises(ConfigError) as exc:
        load_settings(SignalWatcherSettings)
    assert exc.value.settings == ("SIGNAL_SECRETS_KEY_FILES",) and "no_key" in str(exc.value)


def test_the_api_takes_access_tokens_of_the_configured_issuer_for_this_service(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _settings_env(monkeypatch, tmp_path, None)
    settings = load_settings(SignalWatcherSettings)
    assert (settings.audience, AUDIENCE) == ("signal-watcher", "signal-watcher")
    assert settings.jwks_url == f"{LocalIssuer.issuer}/.well-known/jwks.json"
    monkeypatch.delenv("SIGNAL_AUTH_ISSUER")
    with pytest.raises(ConfigError) as exc:
        load_settings(SignalWatcherSettings)
    assert exc.value.settings == ("SIGNAL_AUTH_ISSUER",)
