"""The console's settings: every limit at, just under and just over its boundary; the OpenID client required;
the dev login off unless set, on loopback only; the old shared-key settings refused; no value ever echoed in
the error."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from console.settings import DEFAULT_HTTP_PORT, REFRESH_MARGIN_SECONDS_DEFAULT, ConsoleSettings
from tests.support.stack import private_file
from yovision_platform.errors import ConfigError
from yovision_platform.settings import load_settings
from yovision_platform.web import AUDIENCES


def _refused(setting: str) -> ConfigError:
    with pytest.raises(ConfigError) as refused:
        load_settings(ConsoleSettings)
    assert setting in refused.value.settings, refused.value
    return refused.value


def test_the_local_stack_settings_load_with_their_defaults(console_env: dict[str, str]) -> None:
    settings = load_settings(ConsoleSettings)
    assert settings.dev_login and settings.public_url is None
    assert settings.http_host == "127.0.0.1" and settings.http_port == DEFAULT_HTTP_PORT
    assert settings.api_timeout_seconds == 10.0
    assert settings.refresh_margin_seconds == REFRESH_MARGIN_SECONDS_DEFAULT == 60
    assert len(settings.session_key) == 32 and len(settings.client_secret) >= 32


def test_the_dev_login_is_off_by_default(production_env: dict[str, str]) -> None:
    settings = load_settings(ConsoleSettings)
    assert not settings.dev_login and settings.dev_login_admin_url is None
    assert ConsoleSettings.model_fields["dev_login_admin_url"].default is None


@pytest.mark.parametrize(
    "removed",
    [
        "CONSOLE_OIDC_ISSUER",
        "CONSOLE_OIDC_CLIENT_ID",
        "CONSOLE_OIDC_CLIENT_SECRET_FILE",
        "CONSOLE_SESSION_KEY_FILE",
    ],
)
def test_the_oidc_client_and_the_session_key_are_required(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, removed: str
) -> None:
    monkeypatch.delenv(removed)
    _refused(removed)


@pytest.mark.parametrize(
    "old",
    ["CONSOLE_DEV_SIGN_IN", "CONSOLE_DEV_JWT_KEY_FILES", "CONSOLE_AUTH_JWT_KEY_FILE",
     "CONSOLE_AUTH_JWT_ISSUER", "CONSOLE_SENSE_API_TOKEN_FILE", "CONSOLE_DEV_JWT_ISSUER"],
)  # fmt: skip
def test_the_old_shared_key_settings_are_refused_by_name(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, old: str
) -> None:
    """Left in an env file they would mean nothing: start-up says which to remove."""
    monkeypatch.setenv(old, "true")
    assert _refused(old).settings == (old,)


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://sso.example.com", True),
        ("https://sso.example.com/realms/yovision", True),
        ("http://127.0.0.1:4444", True),
        ("http://localhost:4444", True),
        ("http://[::1]:4444", True),
        ("http://sso.example.com", False),  # plain http off loopback
        ("http://10.0.0.5:4444", False),
        ("https://user:pw-in-url@sso.example.com", False),
        ("ftp://127.0.0.1", False),
        ("sso.example.com", False),
        ("https://" + "s" * 492 + ".example.com", True),  # 512 characters
        ("https://" + "s" * 493 + ".example.com", False),
    ],
)
def test_the_issuer_is_https_or_loopback_http_of_at_most_512_characters(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, url: str, ok: bool
) -> None:
    monkeypatch.delenv("CONSOLE_DEV_LOGIN_ADMIN_URL")  # a remote issuer is no local stack
    monkeypatch.setenv("CONSOLE_OIDC_ISSUER", url)
    if ok:
        assert load_settings(ConsoleSettings).oidc_issuer == url
    else:
        assert "pw-in-url" not in str(_refused("CONSOLE_OIDC_ISSUER"))


@pytest.mark.parametrize(
    ("client_id", "ok"),
    [("console", True), ("c", True), ("c" * 128, True), ("", False), ("c" * 129, False), ("con sole", False),
     ("console/x", False)],
)  # fmt: skip
def test_the_client_id_has_1_to_128_plain_characters(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, client_id: str, ok: bool
) -> None:
    monkeypatch.setenv("CONSOLE_OIDC_CLIENT_ID", client_id)
    if ok:
        assert load_settings(ConsoleSettings).oidc_client_id == client_id
    else:
        _refused("CONSOLE_OIDC_CLIENT_ID")


@pytest.mark.parametrize(("length", "ok"), [(31, False), (32, True), (64, True)])
def test_the_client_secret_has_at_least_32_characters(
    console_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, length: int, ok: bool
) -> None:
    secret = "t" * length
    monkeypatch.setenv("CONSOLE_OIDC_CLIENT_SECRET_FILE", str(private_file(tmp_path / "secret", secret)))
    if ok:
        assert load_settings(ConsoleSettings).client_secret == secret
    else:
        assert secret not in str(_refused("CONSOLE_OIDC_CLIENT_SECRET_FILE"))


def test_a_client_secret_others_may_read_is_refused(
    console_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = private_file(tmp_path / "open.secret", secrets.token_urlsafe(32))
    path.chmod(0o644)
    monkeypatch.setenv("CONSOLE_OIDC_CLIENT_SECRET_FILE", str(path))
    _refused("CONSOLE_OIDC_CLIENT_SECRET_FILE")


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("http://127.0.0.1:4445", True),
        ("http://localhost:4445/", True),
        ("http://[::1]:4445", True),
        ("https://127.0.0.1:4445", True),
        ("http://10.0.0.5:4445", False),  # the admin API is never reached off loopback
        ("https://hydra-admin.example.com", False),
        ("http://user:pw-in-url@127.0.0.1:4445", False),
        ("http://127.0.0.1:4445?x=1", False),
        ("ftp://127.0.0.1", False),
    ],
)
def test_the_dev_login_admin_url_is_on_loopback_only(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, url: str, ok: bool
) -> None:
    monkeypatch.setenv("CONSOLE_DEV_LOGIN_ADMIN_URL", url)
    if ok:
        assert load_settings(ConsoleSettings).dev_login_admin_url == url.rstrip("/")
    else:
        assert "pw-in-url" not in str(_refused("CONSOLE_DEV_LOGIN_ADMIN_URL"))


def test_the_dev_login_needs_a_loopback_issuer(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """So a production configuration (a remote issuer) cannot turn it on."""
    monkeypatch.setenv("CONSOLE_OIDC_ISSUER", "https://sso.example.com")
    _refused("SETTINGS")


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://console.example.com", True),
        ("https://console.example.com/", True),
        ("http://127.0.0.1:18080", True),
        ("http://console.example.com", False),
        ("https://console.example.com/console", False),  # the console serves from its root
        ("https://console.example.com/?x=1", False),
    ],
)
def test_the_public_url_is_an_https_or_loopback_origin(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, url: str, ok: bool
) -> None:
    monkeypatch.setenv("CONSOLE_PUBLIC_URL", url)
    if ok:
        assert load_settings(ConsoleSettings).public_url == url.rstrip("/")
    else:
        _refused("CONSOLE_PUBLIC_URL")


@pytest.mark.parametrize(("value", "ok"), [("9", False), ("10", True), ("3600", True), ("3601", False)])
def test_the_refresh_margin_is_10_to_3600_seconds(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, value: str, ok: bool
) -> None:
    monkeypatch.setenv("CONSOLE_REFRESH_MARGIN_SECONDS", value)
    if ok:
        assert load_settings(ConsoleSettings).refresh_margin_seconds == int(value)
    else:
        _refused("CONSOLE_REFRESH_MARGIN_SECONDS")


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


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("api://yovision", ("api://yovision",)),
        ("sense-reconciler, orphan-scanner", ("sense-reconciler", "orphan-scanner")),
        (",".join(f"a{n}" for n in range(8)), tuple(f"a{n}" for n in range(8))),
        (",".join(f"a{n}" for n in range(9)), None),
        ("", None),
        ("a b", None),
        ("a," + "x" * 256, ("a", "x" * 256)),
        ("a," + "x" * 257, None),
    ],
)
def test_the_audiences_asked_for_are_1_to_8_names_without_spaces(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, value: str, expected: tuple[str, ...] | None
) -> None:
    monkeypatch.setenv("CONSOLE_OIDC_AUDIENCES", value)
    if expected is not None:
        assert load_settings(ConsoleSettings).oidc_audiences == expected
    else:
        _refused("CONSOLE_OIDC_AUDIENCES")


def test_by_default_the_audiences_are_the_five_services(console_env: dict[str, str]) -> None:
    assert load_settings(ConsoleSettings).oidc_audiences == AUDIENCES


@pytest.mark.parametrize(
    ("claim", "grants", "ok"),
    [
        ("realm_access.roles", '{"camera-operator": ["sense:operate", "sense:read"]}', True),
        ("groups", None, True),
        ("c" * 128, None, True),
        ("c" * 129, None, False),
        ("realm_access..roles", None, False),
        ("roles", '{"auditor": ["not a permission"]}', False),
        (None, '{"auditor": ["bell:audit-read"]}', False),  # a map without its claim
    ],
)
def test_the_permission_mapping_is_checked_as_the_services_check_theirs(
    console_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    claim: str | None,
    grants: str | None,
    ok: bool,
) -> None:
    if claim is not None:
        monkeypatch.setenv("CONSOLE_OIDC_PERMISSIONS_CLAIM", claim)
    if grants is not None:
        monkeypatch.setenv("CONSOLE_OIDC_PERMISSIONS_MAP", grants)
    if ok:
        mapping = load_settings(ConsoleSettings).permission_mapping()
        assert mapping is not None and mapping.claim == claim
    else:
        with pytest.raises(ConfigError):
            load_settings(ConsoleSettings)


def test_without_a_mapping_the_permissions_are_the_granted_scopes(console_env: dict[str, str]) -> None:
    assert load_settings(ConsoleSettings).permission_mapping() is None
