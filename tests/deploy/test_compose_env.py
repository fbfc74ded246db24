"""infra/compose.yaml and the chart configure each service with the same settings: the env var names each
container sees (the image's ENV plus what compose or the chart sets) are equal, for `serve` and `migrate`,
but for the few names that only make sense on Kubernetes (CHART_ONLY). Compose's identity provider is the
native path's: the same issuer, on a loopback address every service and the console share, with the secrets
infra/docker/make-secrets.sh writes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.chart import DATABASE_SETTINGS, REPO_ROOT, SETTINGS, containers, env_of
from tests.deploy.dockerfiles import dockerfile
from tests.deploy.renders import rendered
from yovision_platform.settings import is_loopback_host
from yovision_platform.web import checked_url

# The console is in compose as the local stack runs it (the dev login at the local Hydra, plain http to the
# five services on loopback), unlike the chart (the organisation's provider, TLS): only its settings are
# compared, below.
# media-worker: a fixed instance id per pod (its name), so a restarted container releases its own leases at
# once (docs/runbooks/draining-a-worker.md); compose runs one container with the generated id.
# The chart states every setting of token verification an operator may tune (values.yaml holds the services'
# defaults); compose, like `make up`, leaves them to the services' defaults.
VERIFICATION_DEFAULTS = (
    "AUTH_ALGORITHMS",
    "AUTH_LEEWAY_SECONDS",
    "AUTH_PERMISSIONS_CLAIM",
    "AUTH_JWKS_REFRESH_SECONDS",
)
CHART_ONLY = {
    service: {cls.model_config.get("env_prefix", "") + name for name in VERIFICATION_DEFAULTS}
    | ({"MEDIA_INSTANCE_ID"} if service == "media-worker" else set())
    for service, cls in DATABASE_SETTINGS.items()
}
NATIVE_ISSUER = "http://127.0.0.1:14444"  # yovision_platform.tools.devsecrets: the identity provider's port
IN_NETNS = {*DATABASE_SETTINGS, "console", "identity-provider", "identity-provider-clients"}


def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((REPO_ROOT / "infra" / "compose.yaml").read_text())
    return document


def own_settings(service: str, names: set[str]) -> set[str]:
    prefix = SETTINGS[service].model_config.get("env_prefix", "")
    return {name for name in names if name.startswith(prefix)}


def image_settings(service: str) -> set[str]:
    return own_settings(service, set(dockerfile(service).final_env))


@pytest.mark.parametrize("service", tuple(DATABASE_SETTINGS))
@pytest.mark.parametrize("command", ["serve", "migrate"])
def test_compose_and_the_chart_set_the_same_settings(service: str, command: str) -> None:
    compose_service = compose()["services"][service if command == "serve" else f"{service}-migrate"]
    assert compose_service.get("command", ["serve"]) == [command]
    in_compose = image_settings(service) | set(compose_service["environment"])
    manifest = rendered("default")
    workload = manifest.deployments()[service] if command == "serve" else manifest.migration_jobs()[service]
    (container,) = containers(workload)
    assert container["args"] == [command]
    in_chart = image_settings(service) | own_settings(service, set(env_of(container)))
    assert in_chart == in_compose | CHART_ONLY.get(service, set())


@pytest.mark.parametrize("service", tuple(DATABASE_SETTINGS))
def test_compose_sets_only_real_settings(service: str) -> None:
    cls = SETTINGS[service]
    names = {cls.env_var_name(field) for field in cls.model_fields}
    for name in (service, f"{service}-migrate"):
        assert set(compose()["services"][name]["environment"]) <= names


def test_compose_sets_only_real_console_settings_and_every_required_one() -> None:
    cls = SETTINGS["console"]
    names = {cls.env_var_name(field) for field in cls.model_fields}
    environment = set(compose()["services"]["console"]["environment"]) | image_settings("console")
    required = {cls.env_var_name(f) for f, info in cls.model_fields.items() if info.is_required()}
    assert required <= environment <= names


def environment_of(service: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in (service.get("environment") or {}).items()}


def test_every_service_and_the_console_take_the_native_paths_issuer() -> None:
    services = compose()["services"]
    for name in DATABASE_SETTINGS:
        for container in (name, f"{name}-migrate"):
            env = environment_of(services[container])
            assert env[SETTINGS[name].env_var_name("auth_issuer")] == NATIVE_ISSUER
    console = environment_of(services["console"])
    assert console["CONSOLE_OIDC_ISSUER"] == NATIVE_ISSUER
    assert environment_of(services["identity-provider"])["URLS_SELF_ISSUER"] == NATIVE_ISSUER
    assert checked_url(NATIVE_ISSUER) == NATIVE_ISSUER  # plain http, which the services take on loopback only


def test_what_reaches_the_issuer_on_loopback_shares_one_network_namespace() -> None:
    """An http issuer on 127.0.0.1 must be the same Hydra for the browser, the console and every service."""
    services = compose()["services"]
    for name in IN_NETNS:
        assert services[name]["network_mode"] == "service:netns", name
        assert "ports" not in services[name]  # netns publishes them
    published = {int(p.rsplit(":", 1)[1]) for p in services["netns"]["ports"]}
    ports = {SETTINGS[name].model_fields["http_port"].default for name in SETTINGS}
    assert published == ports | {14444}  # not the admin API (14445): it stays inside the namespace
    assert all(p.startswith("127.0.0.1:") for p in services["netns"]["ports"])
    console = environment_of(services["console"])
    for setting in ("SENSE_URL", "ORPHAN_URL", "BELL_URL", "SIGNAL_URL", "MEDIA_URL", "DEV_LOGIN_ADMIN_URL"):
        host = re.match(r"http://([^:/]+)", console[f"CONSOLE_{setting}"])
        assert host is not None and is_loopback_host(host.group(1)), setting
    # the one-shots that need only PostgreSQL stay on the compose network
    for name in ("identity-provider-database", "identity-provider-migrate"):
        assert "network_mode" not in services[name]


def test_hydra_is_the_version_the_native_path_builds() -> None:
    pinned = re.search(r"github.com/ory/hydra/v2 (v\S+)", (REPO_ROOT / "infra/hydra/go.mod").read_text())
    assert pinned is not None
    services = compose()["services"]
    for name in ("identity-provider", "identity-provider-migrate"):
        assert services[name]["image"] == f"oryd/hydra:{pinned.group(1)}"
    assert services["identity-provider"]["command"][:3] == ["serve", "all", "--dev"]  # the local stack only


def test_no_service_mounts_a_jwt_key_or_an_operator_token() -> None:
    document = compose()
    services = document["services"].values()
    names = set(document["secrets"]) | {s for service in services for s in service.get("secrets", [])}
    assert not [n for n in names if "jwt" in n or "api_token" in n]
    for service in services:
        assert not [k for k in environment_of(service) if re.search("_JWT_|API_TOKEN|DEV_SIGN_IN", k)]


def test_make_secrets_writes_every_secret_compose_mounts(tmp_path: Path) -> None:
    """infra/docker/make-secrets.sh run in a copy of its folders (it writes next to them), twice."""
    (tmp_path / "infra" / "docker").mkdir(parents=True)
    shutil.copy2(REPO_ROOT / "infra/docker/make-secrets.sh", tmp_path / "infra/docker/make-secrets.sh")
    shutil.copy2(REPO_ROOT / "infra/versions.env", tmp_path / "infra/versions.env")
    script = tmp_path / "infra/docker/make-secrets.sh"
    runs = [
        subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False) for _ in (1, 2)
    ]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    assert "secrets/" not in runs[1].stdout  # a second run keeps every secret
    secrets_dir = tmp_path / ".local/docker/secrets"
    for name, secret in compose()["secrets"].items():
        path = secrets_dir / Path(secret["file"]).name
        assert path.is_file() and path.stat().st_size > 1, name
        assert path.stat().st_mode & 0o077 == 0, name
    config = yaml.safe_load((secrets_dir / "identity_provider_config").read_text())
    assert config["dsn"] == (secrets_dir / "identity_provider_dsn").read_text().strip()
    system_secret = (secrets_dir / "identity_provider_system_secret").read_text().strip()
    assert config["secrets"]["system"] == [system_secret]
    assert config["dsn"].startswith("postgresql://hydra:")
