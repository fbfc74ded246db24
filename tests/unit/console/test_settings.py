"""The console's settings: every limit at, just under and just over its boundary; exactly one identity
source; dev sign-in off unless set; no value ever echoed in the error."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from console.settings import DEFAULT_HTTP_PORT, JWT_SERVICES, ConsoleSettings
from tests.conftest import private_file
from yovision_platform.errors import ConfigError
from yovision_platform.settings import load_settings


def _refused(setting: str) -> ConfigError:
    with pytest.raises(ConfigError) as refused:
        load_settings(ConsoleSettings)
    assert setting in refused.value.settings, refused.value
    return refused.value


def test_the_local_stack_settings_load_with_their_defaults(console_env: dict[str, str]) -> None:
    settings = load_settings(ConsoleSettings)
    assert settings.dev_sign_in is True and settings.verifier is None
    assert settings.http_host == "127.0.0.1" and settings.http_port == DEFAULT_HTTP_PORT
    assert settings.api_timeout_seconds == 10.0
    assert set(settings.dev_minters) == set(JWT_SERVICES)
    assert len(settings.session_key) == 32


def test_dev_sign_in_is_off_by_default(production_env: Path) -> None:
    settings = load_settings(ConsoleSettings)
    assert settings.dev_sign_in is False and settings.verifier is not None
    assert ConsoleSettings.model_fields["dev_sign_in"].default is False


def test_without_either_identity_source_it_refuses_to_start(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dev sign-in removed and no OIDC settings: neither is assumed."""
    monkeypatch.delenv("CONSOLE_DEV_SIGN_IN")
    monkeypatch.delenv("CONSOLE_DEV_JWT_KEY_FILES")
    _refused("SETTINGS")


def test_both_identity_sources_at_once_are_refused(
    console_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONSOLE_AUTH_JWT_KEY_FILE", str(private_file(tmp_path / "k", secrets.token_hex(32))))
    monkeypatch.setenv("CONSOLE_AUTH_JWT_ISSUER", "issuer")
    _refused("SETTINGS")


def test_the_jwt_key_and_issuer_come_together(production_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONSOLE_AUTH_JWT_ISSUER")
    _refused("SETTINGS")


@pytest.mark.parametrize(
    ("keys", "ok"),
    [(JWT_SERVICES, True), (JWT_SERVICES[:-1], False), ((*JWT_SERVICES, "sense-reconciler"), False)],
)
def test_dev_sign_in_needs_exactly_one_key_per_jwt_service(
    console_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    keys: tuple[str, ...],
    ok: bool,
) -> None:
    files = {s: str(private_file(tmp_path / f"d-{s}", secrets.token_hex(32))) for s in keys}
    monkeypatch.setenv("CONSOLE_DEV_JWT_KEY_FILES", json.dumps(files))
    if ok:
        assert set(load_settings(ConsoleSettings).dev_minters) == set(keys)
    else:
        _refused("SETTINGS")


@pytest.mark.parametrize(("value", "ok"), [("0", False), ("0.001", True), ("60", True), ("60.001", False)])
def test_api_timeout_is_within_0_to_60_seconds(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, value: str, ok: bool
) -> None:
    monkeypatch.setenv("CONSOLE_API_TIMEOUT_SECONDS", value)
    if ok:
        assert load_settings(ConsoleSettings).api_timeout_seconds == float(value)
    else:
        _refused("CONSOLE_API_TIMEOUT_SECONDS")


@pytest.mark.parametrize(("value", "ok"), [("0", False), ("1", True), ("65535", True), ("65536", False)])
def test_http_port_is_a_port(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, value: str, ok: bool
) -> None:
    monkeypatch.setenv("CONSOLE_HTTP_PORT", value)
    if ok:
        assert load_settings(ConsoleSettings).http_port == int(value)
    else:
        _refused("CONSOLE_HTTP_PORT")


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("http://127.0.0.1:18081", True),
        ("http://localhost:18081/", True),
        ("http://[::1]:18081", True),
        ("https://sense.internal.example.com", True),
        ("http://sense.internal.example.com", False),  # plain http off loopback
        ("http://10.0.0.5:18081", False),
        ("https://user:pw-in-url@sense.example.com", False),
        ("https://sense.example.com?x=1", False),
        ("ftp://127.0.0.1", False),
        ("127.0.0.1:18081", False),
    ],
)
def test_service_urls_are_https_or_loopback_http_without_credentials(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, url: str, ok: bool
) -> None:
    monkeypatch.setenv("CONSOLE_SENSE_URL", url)
    if ok:
        assert not load_settings(ConsoleSettings).sense_url.endswith("/")
    else:
        refused = _refused("CONSOLE_SENSE_URL")
        assert "pw-in-url" not in str(refused)


@pytest.mark.parametrize(("size", "ok"), [(31, False), (32, True), (64, True)])
def test_the_session_key_has_at_least_32_bytes(
    console_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int, ok: bool
) -> None:
    key = secrets.token_hex(size)
    monkeypatch.setenv("CONSOLE_SESSION_KEY_FILE", str(private_file(tmp_path / "s.key", key)))
    if ok:
        assert len(load_settings(ConsoleSettings).session_key) == size
    else:
        assert key not in str(_refused("CONSOLE_SESSION_KEY_FILE"))


def test_a_session_key_others_may_read_is_refused(
    console_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = private_file(tmp_path / "open.key", secrets.token_hex(32))
    path.chmod(0o644)
    monkeypatch.setenv("CONSOLE_SESSION_KEY_FILE", str(path))
    _refused("CONSOLE_SESSION_KEY_FILE")


@pytest.mark.parametrize(("length", "ok"), [(31, False), (32, True)])
def test_the_sense_token_has_at_least_32_characters(
    console_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, length: int, ok: bool
) -> None:
    token = "t" * length
    monkeypatch.setenv("CONSOLE_SENSE_API_TOKEN_FILE", str(private_file(tmp_path / "tok", token)))
    if ok:
        assert load_settings(ConsoleSettings).sense_token == token
    else:
        assert token not in str(_refused("CONSOLE_SENSE_API_TOKEN_FILE"))


@pytest.mark.parametrize(("length", "ok"), [(0, False), (1, True), (128, True), (129, False)])
def test_the_oidc_issuer_has_1_to_128_characters(
    production_env: Path, monkeypatch: pytest.MonkeyPatch, length: int, ok: bool
) -> None:
    monkeypatch.setenv("CONSOLE_AUTH_JWT_ISSUER", "i" * length)
    if ok:
        assert load_settings(ConsoleSettings).auth_jwt_issuer == "i" * length
    else:
        _refused("CONSOLE_AUTH_JWT_ISSUER")


@pytest.mark.parametrize(
    ("hosts", "url", "ok"),
    [
        ("[]", "http://sense-reconciler:18081", False),
        ('["sense-reconciler"]', "http://sense-reconciler:18081", True),
        ('["sense-reconciler"]', "http://sense-reconciler.evil.example.com:18081", False),
        ('["bell-receiver"]', "http://sense-reconciler:18081", False),
        ('["sense-reconciler"]', "https://anything.example.com", True),
    ],
)
def test_plain_http_off_loopback_only_to_the_hosts_an_operator_names(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, hosts: str, url: str, ok: bool
) -> None:
    monkeypatch.setenv("CONSOLE_PLAIN_HTTP_HOSTS", hosts)
    monkeypatch.setenv("CONSOLE_SENSE_URL", url)
    if ok:
        assert load_settings(ConsoleSettings).sense_url == url
    else:
        _refused("CONSOLE_SENSE_URL")


@pytest.mark.parametrize(
    ("hosts", "ok"),
    [
        ('["sense-reconciler", "bell-receiver.yovision.svc.cluster.local"]', True),
        ('["10.0.0.5"]', False),  # an address, not a name
        ('["*.svc"]', False),
        ('["Sense"]', False),
        ('["a/b"]', False),
        (json.dumps([f"h{n}" for n in range(16)]), True),
        (json.dumps([f"h{n}" for n in range(17)]), False),
    ],
)
def test_plain_http_hosts_are_at_most_16_dns_names(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, hosts: str, ok: bool
) -> None:
    monkeypatch.setenv("CONSOLE_PLAIN_HTTP_HOSTS", hosts)
    if ok:
        assert len(load_settings(ConsoleSettings).plain_http_hosts) == len(json.loads(hosts))
    else:
        _refused("CONSOLE_PLAIN_HTTP_HOSTS")
