"""`AccessTokenSettings`: each limit at, under and over its boundary, refused values named by their env var
and never echoed."""

from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic_settings import SettingsConfigDict

from yovision_platform.errors import ConfigError
from yovision_platform.settings import Port, load_settings
from yovision_platform.web import AccessTokenSettings, PermissionMapping


class DemoTokenSettings(AccessTokenSettings):
    model_config = SettingsConfigDict(env_prefix="DEMO_")
    audience: ClassVar[str] = "demo-service"
    http_port: Port = 18089


@pytest.fixture
def token_env(demo_env: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    demo_env.setenv("DEMO_AUTH_ISSUER", "http://127.0.0.1:14444")
    return demo_env


def refused(env: pytest.MonkeyPatch, name: str, value: str) -> str:
    env.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        load_settings(DemoTokenSettings)
    text = str(caught.value)
    assert name in text
    return text


def test_defaults_verify_hydra_tokens_of_the_local_stack(token_env: pytest.MonkeyPatch) -> None:
    settings = load_settings(DemoTokenSettings)
    assert settings.jwks_url == "http://127.0.0.1:14444/.well-known/jwks.json"
    assert settings.auth_algorithms == {"RS256", "ES256"}
    assert settings.permission_mapping() == PermissionMapping("scp", None)
    assert (settings.auth_leeway_seconds, settings.auth_jwks_refresh_seconds) == (5, 300)
    assert settings.token_audience == "demo-service"


@pytest.mark.parametrize(
    ("issuer", "jwks"),
    [
        ("https://tenant.eu.auth0.com/", "https://tenant.eu.auth0.com/.well-known/jwks.json"),
        ("http://127.0.0.1:14444", "http://127.0.0.1:14444/.well-known/jwks.json"),
    ],
)
def test_the_issuer_is_kept_exactly_as_tokens_carry_it(
    token_env: pytest.MonkeyPatch, issuer: str, jwks: str
) -> None:
    """`iss` is compared character for character: Auth0's issuer ends in `/`, and a verifier that dropped
    it would refuse every Auth0 token."""
    token_env.setenv("DEMO_AUTH_ISSUER", issuer)
    settings = load_settings(DemoTokenSettings)
    assert (settings.auth_issuer, settings.jwks_url) == (issuer, jwks)


@pytest.mark.parametrize(
    ("value", "ok"), [("a" * 256, True), ("a" * 257, False), ("api://yovision", True), ("two words", False)]
)
def test_an_audience_setting_replaces_the_service_name(
    token_env: pytest.MonkeyPatch, value: str, ok: bool
) -> None:
    token_env.setenv("DEMO_AUTH_AUDIENCE", value)
    if ok:
        assert load_settings(DemoTokenSettings).token_audience == value
    else:
        refused(token_env, "DEMO_AUTH_AUDIENCE", value)


@pytest.mark.parametrize(
    "issuer",
    [
        "https://login.example.org/realms/yovision",
        "http://localhost:8080",
        "http://[::1]:4444/",
        "https://h/",
    ],
)
def test_an_https_issuer_or_an_http_one_on_loopback_is_taken(
    token_env: pytest.MonkeyPatch, issuer: str
) -> None:
    token_env.setenv("DEMO_AUTH_ISSUER", issuer)
    settings = load_settings(DemoTokenSettings)
    assert not settings.jwks_url.startswith(f"{issuer.rstrip('/')}//")


@pytest.mark.parametrize(
    "issuer",
    ["http://login.example.org", "ftp://127.0.0.1", "https://user:pw@login.example.org", "login", ""],
)
def test_an_issuer_anyone_on_the_path_could_answer_for_is_refused(
    token_env: pytest.MonkeyPatch, issuer: str
) -> None:
    text = refused(token_env, "DEMO_AUTH_ISSUER", issuer)
    assert "user:pw" not in text


@pytest.mark.parametrize("algorithms", ["HS256", "RS256,HS256", "none", ","])
def test_only_asymmetric_algorithms_are_allowed(token_env: pytest.MonkeyPatch, algorithms: str) -> None:
    refused(token_env, "DEMO_AUTH_ALGORITHMS", algorithms)


def test_algorithms_are_a_comma_separated_list(token_env: pytest.MonkeyPatch) -> None:
    token_env.setenv("DEMO_AUTH_ALGORITHMS", "ES256, PS256")
    assert load_settings(DemoTokenSettings).auth_algorithms == {"ES256", "PS256"}


@pytest.mark.parametrize(("value", "ok"), [("-1", False), ("0", True), ("60", True), ("61", False)])
def test_the_leeway_is_0_to_60_seconds(token_env: pytest.MonkeyPatch, value: str, ok: bool) -> None:
    token_env.setenv("DEMO_AUTH_LEEWAY_SECONDS", value)
    if ok:
        assert load_settings(DemoTokenSettings).auth_leeway_seconds == int(value)
    else:
        refused(token_env, "DEMO_AUTH_LEEWAY_SECONDS", value)


@pytest.mark.parametrize(("value", "ok"), [("9", False), ("10", True), ("86400", True), ("86401", False)])
def test_the_jwks_refresh_is_10_s_to_a_day(token_env: pytest.MonkeyPatch, value: str, ok: bool) -> None:
    token_env.setenv("DEMO_AUTH_JWKS_REFRESH_SECONDS", value)
    if ok:
        assert load_settings(DemoTokenSettings).auth_jwks_refresh_seconds == float(value)
    else:
        refused(token_env, "DEMO_AUTH_JWKS_REFRESH_SECONDS", value)


def test_a_permission_map_maps_roles_to_permissions(token_env: pytest.MonkeyPatch) -> None:
    token_env.setenv("DEMO_AUTH_PERMISSIONS_CLAIM", "realm_access.roles")
    token_env.setenv("DEMO_AUTH_PERMISSIONS_MAP", '{"camera-operator": ["sense:operate", "sense:read"]}')
    mapping = load_settings(DemoTokenSettings).permission_mapping()
    assert mapping.permissions({"realm_access": {"roles": ["camera-operator"]}}) == {
        "sense:operate",
        "sense:read",
    }


@pytest.mark.parametrize("value", ['{"admin": ["Everything"]}', '["sense:read"]', "not json"])
def test_a_permission_map_that_cannot_mean_anything_is_refused(
    token_env: pytest.MonkeyPatch, value: str
) -> None:
    refused(token_env, "DEMO_AUTH_PERMISSIONS_MAP", value)
