"""infra/compose.yaml and the chart configure each service with the same settings: the env var names each
container sees (the image's ENV plus what compose or the chart sets) are equal, for `serve` and `migrate`,
but for the few names that only make sense on Kubernetes (CHART_ONLY)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.deploy.chart import DATABASE_SETTINGS, REPO_ROOT, SETTINGS, containers, env_of
from tests.deploy.dockerfiles import dockerfile
from tests.deploy.renders import rendered

# The console is not in compose: it refuses plain HTTP to the services off loopback, and compose has no TLS.
# media-worker: a fixed instance id per pod (its name), so a restarted container releases its own leases at
# once (docs/runbooks/draining-a-worker.md); compose runs one container with the generated id.
CHART_ONLY = {"media-worker": {"MEDIA_INSTANCE_ID"}}


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
