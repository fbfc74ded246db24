"""Audit push settings: off by default, HTTPS unless loopback, key file of at least 32 bytes, and errors that
name the setting but never its value."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from sense_reconciler.domain.audit_push import (
    BATCH_MAX_ITEMS,
    LEASE_SECONDS,
    REQUEST_DEADLINE_SECONDS,
    AuditPushConfig,
)
from sense_reconciler.settings import SETTING_BELL_KEY_FILE as SETTING_KEY_FILE
from sense_reconciler.settings import SETTING_BELL_KEY_ID as SETTING_KEY_ID
from sense_reconciler.settings import SETTING_BELL_URL as SETTING_URL
from sense_reconciler.settings import load_audit_push_config, validate_bell_url
from yovision_platform.errors import ConfigError
from yovision_platform.security import MIN_KEY_BYTES


def key_file(tmp_path: Path, n_bytes: int) -> Path:
    path = tmp_path / f"bell-{n_bytes}.key"
    path.write_text(secrets.token_hex(n_bytes) + "\n")
    path.chmod(0o600)
    return path


def load(
    url: str | None, key: Path | None, key_id: str | None = "sense-1", enabled: bool = True
) -> AuditPushConfig | None:
    return load_audit_push_config(enabled=enabled, bell_url=url, key_file=key, key_id=key_id)


def test_the_audit_push_is_off_unless_enabled_even_without_any_other_setting() -> None:
    assert load_audit_push_config(enabled=False, bell_url=None, key_file=None, key_id=None) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://bell.internal:8443",
        "http://10.0.0.5",
        "http://127.0.0.1.example.com",
        "http://[::ffff:10.0.0.1]",
    ],
)
def test_plain_http_to_a_non_loopback_host_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_bell_url(url)
    assert caught.value.settings == (SETTING_URL,)
    assert caught.value.problems[0].reason == "url_not_https"
    assert url not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://bell.internal",
        "https://bell.internal:8443/",
        "http://127.0.0.1:18083",
        "http://localhost:1",
        "http://[::1]:8080",
        "http://127.9.9.9",
    ],
)
def test_https_anywhere_and_plain_http_on_loopback_are_accepted(url: str) -> None:
    assert validate_bell_url(url) == url.rstrip("/")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://bell.internal", "url_malformed"),
        ("https://", "url_malformed"),
        ("bell.internal", "url_malformed"),
        ("https://bell.internal:99999", "url_malformed"),
        ("https://user:pw-s3cret@bell.internal", "url_has_credentials"),
        ("https://bell.internal/internal/v1", "url_has_path"),
        ("https://bell.internal?x=1", "url_has_path"),
    ],
)
def test_malformed_urls_are_refused_with_a_reason(url: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_bell_url(url)
    assert caught.value.settings == (SETTING_URL,)
    assert caught.value.problems[0].reason == reason
    assert "s3cret" not in str(caught.value)


def test_a_key_of_32_bytes_is_accepted_and_31_bytes_refused(tmp_path: Path) -> None:
    config = load("https://bell.internal", key_file(tmp_path, MIN_KEY_BYTES))
    assert config is not None
    assert config.keyring.active_key_id == "sense-1"
    assert len(config.keyring.active().secret) == MIN_KEY_BYTES
    with pytest.raises(ConfigError) as caught:
        load("https://bell.internal", key_file(tmp_path, MIN_KEY_BYTES - 1))
    assert caught.value.settings == (SETTING_KEY_FILE,)
    assert caught.value.problems[0].reason == "key_too_short"


def test_a_world_readable_key_file_is_refused_without_naming_its_path_or_content(tmp_path: Path) -> None:
    path = key_file(tmp_path, 32)
    path.chmod(0o644)
    with pytest.raises(ConfigError) as caught:
        load("https://bell.internal", path)
    assert caught.value.settings == (SETTING_KEY_FILE,)
    assert str(path) not in str(caught.value) and path.read_text().strip() not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "key", "key_id", "setting"),
    [
        (None, True, "sense-1", SETTING_URL),
        ("", True, "sense-1", SETTING_URL),
        ("https://bell.internal", True, None, SETTING_KEY_ID),
        ("https://bell.internal", True, "bad id!", SETTING_KEY_ID),
        ("https://bell.internal", False, "sense-1", SETTING_KEY_FILE),
    ],
)
def test_enabled_without_a_setting_names_the_missing_one(
    tmp_path: Path, url: str | None, key: bool, key_id: str | None, setting: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(url, key_file(tmp_path, 32) if key else None, key_id)
    assert caught.value.settings == (setting,)


def test_the_request_deadline_must_be_shorter_than_the_lease(tmp_path: Path) -> None:
    config = load("https://bell.internal", key_file(tmp_path, 32))
    assert config is not None
    assert config.request_deadline_seconds == REQUEST_DEADLINE_SECONDS < config.lease_seconds == LEASE_SECONDS
    assert config.batch_size == BATCH_MAX_ITEMS == 100
    with pytest.raises(ValueError, match="shorter"):
        AuditPushConfig(config.bell_url, config.keyring, lease_seconds=10.0, request_deadline_seconds=10.0)
    AuditPushConfig(config.bell_url, config.keyring, lease_seconds=10.0, request_deadline_seconds=9.99)


@pytest.mark.parametrize(("size", "ok"), [(0, False), (1, True), (100, True), (101, False)])
def test_batch_size_stays_within_the_contract(tmp_path: Path, size: int, ok: bool) -> None:
    config = load("https://bell.internal", key_file(tmp_path, 32))
    assert config is not None
    if ok:
        assert AuditPushConfig(config.bell_url, config.keyring, batch_size=size).batch_size == size
    else:
        with pytest.raises(ValueError, match="batch_size"):
            AuditPushConfig(config.bell_url, config.keyring, batch_size=size)


def test_the_config_repr_shows_no_key(tmp_path: Path) -> None:
    path = key_file(tmp_path, 32)
    config = load("https://bell.internal", path)
    assert path.read_text().strip() not in repr(config)
