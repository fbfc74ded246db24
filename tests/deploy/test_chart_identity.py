"""Identity in the chart (issue 23): every service takes the access tokens of one OpenID provider,
`auth.issuer`, with its audience, algorithms, leeway, permission claim and mapping from the values; the
console signs users in there with its own client; no JWT key and no operator token is mounted or named
anywhere. The schema refuses a missing issuer and takes an http issuer exactly where the services do: on a
loopback address only."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from pydantic_settings import SettingsConfigDict

from tests.deploy.chart import (
    CHART,
    DATABASE_SETTINGS,
    PRODUCTION_VALUES,
    RELEASE,
    REQUIRED_VALUES,
    SETTINGS,
    containers,
    env_of,
    helm,
    pod_spec,
    render_text,
)
from tests.deploy.renders import RENDERS, rendered
from tests.deploy.values import enabled_services, values_of
from yovision_platform.settings import Port, load_settings
from yovision_platform.tools.localhost import write_private_file
from yovision_platform.web import (
    ASYMMETRIC_ALGORITHMS,
    AUDIENCES,
    AccessTokenSettings,
    PermissionMapping,
    checked_url,
)
from yovision_platform.web._auth import JWT_LEEWAY_SECONDS_MAX

SECRET_DIR = "/run/secrets/yovision/"
SCHEMA_REFUSED = "values don't meet the specifications of the schema"
# The shared keys and tokens that issue 23 removed: neither a Secret key nor a setting may name them again.
OLD_SECRET_KEYS = {"jwt-key", "api-token", "sense-api-token"}
OLD_SETTING = re.compile(r"_JWT_|API_TOKEN|DEV_SIGN_IN")


def env_values(name: str, service: str) -> dict[str, str]:
    (container,) = containers(rendered(name).deployments()[service])
    return {setting: entry.get("value", "") for setting, entry in env_of(container).items()}


def audience_of(name: str, service: str) -> str:
    audiences: dict[str, str] = values_of(name)["auth"].get("audiences") or {}
    return audiences.get(service, service)


def test_the_audiences_are_the_services_names_the_platform_knows() -> None:
    assert tuple(DATABASE_SETTINGS) == AUDIENCES
    for service, cls in DATABASE_SETTINGS.items():
        assert issubclass(cls, AccessTokenSettings)
        assert cls.audience == service


@pytest.mark.parametrize("name", RENDERS)
@pytest.mark.parametrize("service", tuple(DATABASE_SETTINGS))
def test_every_service_takes_the_access_tokens_of_the_issuer(
    name: str, service: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rendered <P>AUTH_* settings, loaded from the environment by the services' settings base as at
    start-up, are the values'."""
    auth = values_of(name)["auth"]
    cls = DATABASE_SETTINGS[service]
    prefix = cls.model_config.get("env_prefix", "")
    env = env_values(name, service)
    rendered_auth = {k.removeprefix(prefix): v for k, v in env.items() if k.startswith(f"{prefix}AUTH_")}
    assert rendered_auth["AUTH_ISSUER"] == auth["issuer"]
    assert ("AUTH_JWKS_URL" in rendered_auth) == bool(auth.get("jwksUrl"))
    assert ("AUTH_PERMISSIONS_MAP" in rendered_auth) == bool(auth["permissionsMap"])
    assert ("AUTH_AUDIENCE" in rendered_auth) == (service in (auth.get("audiences") or {}))

    class Loaded(AccessTokenSettings):
        model_config = SettingsConfigDict(env_prefix=prefix)
        audience: ClassVar[str] = cls.audience
        http_port: Port = 18000

    dsn = write_private_file(tmp_path / "dsn", "postgresql://app:pw@db.example.com:5432/yovision")
    for setting, value in rendered_auth.items():
        monkeypatch.setenv(prefix + setting, value)
    loaded = load_settings(Loaded, database_dsn_file=dsn, kafka_bootstrap="kafka:9092")
    assert loaded.auth_issuer == auth["issuer"]
    assert loaded.token_audience == audience_of(name, service)
    assert loaded.jwks_url == (auth.get("jwksUrl") or f"{auth['issuer']}/.well-known/jwks.json")
    assert loaded.auth_algorithms == frozenset(auth["algorithms"])
    assert loaded.auth_leeway_seconds == auth["leewaySeconds"]
    assert loaded.auth_jwks_refresh_seconds == auth["jwksRefreshSeconds"]
    grants = {grant: frozenset(perms) for grant, perms in auth["permissionsMap"].items()} or None
    assert loaded.permission_mapping() == PermissionMapping(auth["permissionsClaim"], grants)


def test_the_permission_map_is_rendered_as_a_json_object_of_the_values() -> None:
    permissions_map = values_of("production")["auth"]["permissionsMap"]
    assert permissions_map  # the production-like values map Keycloak's realm roles
    for service, cls in DATABASE_SETTINGS.items():
        rendered_map = env_values("production", service)[cls.env_var_name("auth_permissions_map")]
        assert json.loads(rendered_map) == permissions_map
    # a grant whose name YAML would read as something else stays the string it is
    text = render_text(settings={"auth.permissionsMap.true[0]": "signal:read"})
    assert text.returncode == 0, text.stderr
    (container,) = (
        c
        for o in yaml.safe_load_all(text.stdout)
        if o and o["kind"] == "Deployment" and o["metadata"]["name"].endswith("signal-watcher")
        for c in containers(o)
    )
    assert json.loads(env_of(container)["SIGNAL_AUTH_PERMISSIONS_MAP"]["value"]) == {"true": ["signal:read"]}


@pytest.mark.parametrize("name", RENDERS)
def test_no_jwt_key_or_operator_token_is_mounted_or_named_anywhere(name: str) -> None:
    manifest = rendered(name)
    for workload in manifest.of_kind("Deployment") + manifest.of_kind("Job"):
        volumes = pod_spec(workload)["volumes"]
        keys = {item["key"] for v in volumes if "secret" in v for item in v["secret"].get("items", [])}
        assert not keys & OLD_SECRET_KEYS, workload["metadata"]["name"]
        for container in containers(workload):
            assert not [setting for setting in env_of(container) if OLD_SETTING.search(setting)]
    for old in (*OLD_SECRET_KEYS, "jwtIssuer", "AUTH_JWT", "API_TOKEN"):
        assert old not in manifest.text
    for source in (CHART / "values.yaml", CHART / "values.schema.json", PRODUCTION_VALUES):
        assert not any(old in source.read_text() for old in (*OLD_SECRET_KEYS, "jwtIssuer", "AUTH_JWT"))


@pytest.mark.parametrize("name", [n for n in RENDERS if "console" in enabled_services(n)])
def test_the_console_signs_users_in_at_the_issuer_with_its_own_client(name: str) -> None:
    values = values_of(name)
    console = rendered(name).deployments()["console"]
    env = env_values(name, "console")
    assert env["CONSOLE_OIDC_ISSUER"] == values["auth"]["issuer"]
    assert env["CONSOLE_OIDC_CLIENT_ID"] == values["services"]["console"]["oidc"]["clientId"]
    assert env["CONSOLE_OIDC_CLIENT_SECRET_FILE"] == SECRET_DIR + "oidc-client-secret"
    volumes = {v["name"]: v for v in pod_spec(console)["volumes"]}
    assert {i["key"] for i in volumes["secrets"]["secret"]["items"]} == {"session-key", "oidc-client-secret"}
    # it asks for tokens good at the five services, and reads permissions from them as the services do
    audiences = [audience_of(name, service) for service in AUDIENCES]
    assert env["CONSOLE_OIDC_AUDIENCES"].split(",") == audiences
    assert env["CONSOLE_OIDC_PERMISSIONS_CLAIM"] == values["auth"]["permissionsClaim"]
    permissions_map = values["auth"]["permissionsMap"]
    assert json.loads(env.get("CONSOLE_OIDC_PERMISSIONS_MAP", "{}")) == permissions_map
    # behind the Ingress, its redirect URI is the console host's, over https
    assert env["CONSOLE_PUBLIC_URL"] == f"https://{values['ingress']['consoleHost']}"
    assert "CONSOLE_DEV_LOGIN_ADMIN_URL" not in env  # the dev login is the local stack's only


def test_the_consoles_public_url_is_the_value_when_given() -> None:
    settings = {
        "services.console.enabled": "true",
        **{f"services.{s}.tls.secretName": f"{s}-tls" for s in DATABASE_SETTINGS},
    }
    without = render_text(settings=settings)
    assert without.returncode == 0, without.stderr
    assert "CONSOLE_PUBLIC_URL" not in without.stdout  # no Ingress, no value: the request's own URL
    given = render_text(settings={**settings, "services.console.publicUrl": "https://console.example.org/"})
    assert given.returncode == 0, given.stderr
    assert re.search(r'name: CONSOLE_PUBLIC_URL\n\s+value: "https://console.example.org"\n', given.stdout)


def test_the_dev_login_cannot_be_set_through_the_chart() -> None:
    result = render_text(
        settings={"services.console.settings.CONSOLE_DEV_LOGIN_ADMIN_URL": "http://127.0.0.1:14445"}
    )
    assert result.returncode != 0
    assert SCHEMA_REFUSED in result.stderr and "CONSOLE_DEV_LOGIN_ADMIN_URL" in result.stderr


def test_the_drain_hook_asks_for_the_audience_media_worker_requires() -> None:
    """The hook reads the instance's MEDIA_AUTH_AUDIENCE: an audience of the values reaches both."""
    for name in RENDERS:
        env = env_values(name, "media-worker")
        assert env.get("MEDIA_AUTH_AUDIENCE", "media-worker") == audience_of(name, "media-worker")
    assert audience_of("production+options", "media-worker") != "media-worker"  # the case is rendered


def notes(values_file: Path) -> str:
    result = helm(
        "install", RELEASE, str(CHART), "--namespace", "yovision", "--dry-run=client",
        "--values", str(REQUIRED_VALUES), "--values", str(PRODUCTION_VALUES), "--values", str(values_file),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.partition("\nNOTES:\n")[2]


def test_the_install_notes_name_what_the_provider_must_issue(tmp_path: Path) -> None:
    values_file = tmp_path / "audiences.yaml"
    values_file.write_text(yaml.safe_dump({"auth": {"audiences": {"bell-receiver": "api://yovision-bell"}}}))
    text = notes(values_file)
    listed = re.findall(r"^    (\S+)", text, re.M)
    assert listed == [s if s != "bell-receiver" else "api://yovision-bell" for s in AUDIENCES]
    values = values_of("production")
    assert values["auth"]["issuer"] in text
    services = values["services"]
    assert f"the client {services['media-worker']['drain']['clientId']} (grant client_credentials" in text
    console_url = f"https://{values['ingress']['consoleHost']}"
    assert f"the client {services['console']['oidc']['clientId']} (authorization code" in text
    assert f"{console_url}/oidc/callback" in text


# An issuer URL: (value, whether the services take it). The schema must agree with `checked_url` on each.
ISSUERS = [
    ("https://login.example.com", True),
    ("https://login.example.com/realms/yovision", True),
    ("https://login.example.com:8443/", True),
    ("http://127.0.0.1:14444", True),
    ("http://127.0.0.0", True),  # the bottom of 127.0.0.0/8
    ("http://127.255.255.255", True),  # its top
    ("http://126.255.255.255", False),  # just under
    ("http://128.0.0.0", False),  # just over
    ("http://localhost:4444", True),
    ("http://LOCALHOST:4444", True),
    ("http://[::1]:4444", True),
    ("http://login.example.com", False),
    ("http://10.0.0.1:4444", False),
    ("http://localhost.example.com", False),
    ("http://127.0.0.1.example.com", False),
    ("https://user:pw@login.example.com", False),
    ("ftp://login.example.com", False),
    ("login.example.com", False),
]


@pytest.mark.parametrize(("issuer", "taken"), ISSUERS, ids=[i for i, _ in ISSUERS])
def test_the_schema_takes_an_issuer_exactly_where_the_services_do(
    issuer: str, taken: bool, tmp_path: Path
) -> None:
    try:
        checked_url(issuer)
    except ValueError:
        by_services = False
    else:
        by_services = True
    assert by_services == taken  # the table states the services' rule
    values_file = tmp_path / "issuer.yaml"
    values_file.write_text(yaml.safe_dump({"auth": {"issuer": issuer, "jwksUrl": issuer}}))
    result = render_text([values_file])
    if taken:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0
        assert SCHEMA_REFUSED in result.stderr
        assert "/auth/issuer" in result.stderr and "/auth/jwksUrl" in result.stderr


def test_an_install_without_an_issuer_is_refused() -> None:
    """values.yaml has no issuer that could be right: none given, or an empty one, fails before rendering."""
    missing = helm("template", RELEASE, str(CHART), "--namespace", "yovision")
    empty = render_text(settings={"auth.issuer": ""})
    for result in (missing, empty):
        assert result.returncode != 0
        assert SCHEMA_REFUSED in result.stderr and "/auth/issuer" in result.stderr


@pytest.mark.parametrize(
    ("key", "value", "taken"),
    [
        ("auth.leewaySeconds", "0", True),
        ("auth.leewaySeconds", str(JWT_LEEWAY_SECONDS_MAX), True),
        ("auth.leewaySeconds", str(JWT_LEEWAY_SECONDS_MAX + 1), False),
        ("auth.leewaySeconds", "-1", False),
        ("auth.jwksRefreshSeconds", "9", False),
        ("auth.jwksRefreshSeconds", "10", True),
        ("auth.jwksRefreshSeconds", "86400", True),
        ("auth.jwksRefreshSeconds", "86401", False),
        ("auth.algorithms", "{RS256,HS256}", False),
        ("auth.algorithms", "{none}", False),
        ("auth.algorithms", "null", False),
        ("auth.permissionsClaim", "realm_access.roles", True),
        ("auth.permissionsClaim", "realm_access..roles", False),
        ("auth.permissionsMap.admins[0]", "signal:read", True),
        ("auth.permissionsMap.admins[0]", "everything", False),
        ("auth.audiences.bell-receiver", "api://yovision-bell", True),
        ("auth.audiences.console", "console", False),  # the console takes no access token
        ("auth.audiences.bell-receiver", "two words", False),
    ],
)
def test_the_schema_bounds_the_auth_values_as_the_services_do(key: str, value: str, taken: bool) -> None:
    result = render_text(settings={key: value})
    assert (result.returncode == 0) == taken, result.stderr
    if not taken:
        assert SCHEMA_REFUSED in result.stderr


def test_the_schema_allows_exactly_the_asymmetric_algorithms_of_the_verifier() -> None:
    schema: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())
    allowed = schema["properties"]["auth"]["properties"]["algorithms"]["items"]["enum"]
    assert set(allowed) == ASYMMETRIC_ALGORITHMS
    for algorithm in allowed:
        result = render_text(settings={"auth.algorithms": f"{{{algorithm}}}"})
        assert result.returncode == 0, result.stderr


def test_the_console_settings_class_has_the_settings_the_chart_renders() -> None:
    names = {SETTINGS["console"].env_var_name(f) for f in SETTINGS["console"].model_fields}
    assert {"CONSOLE_OIDC_ISSUER", "CONSOLE_OIDC_CLIENT_ID", "CONSOLE_OIDC_CLIENT_SECRET_FILE"} <= names
    assert not [n for n in names if OLD_SETTING.search(n)]


def test_one_audience_for_every_service_is_asked_for_once() -> None:
    """Auth0 issues one audience per token: the services then share one, and the console asks for it."""
    shared = {f"auth.audiences.{service}": "api://yovision" for service in AUDIENCES}
    result = render_text([PRODUCTION_VALUES], shared)
    assert result.returncode == 0, result.stderr
    assert re.search(r'name: CONSOLE_OIDC_AUDIENCES.*\n\s+value: "api://yovision"\n', result.stdout)
