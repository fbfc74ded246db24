"""The chart configures each service only through settings its settings class has, sets every required
one, and its values schema allows exactly the remaining settings as `settings` (a typo fails at install)."""

from __future__ import annotations

import json

import pytest

from tests.deploy.chart import CHART, SETTINGS, containers, env_of
from tests.deploy.renders import RENDERS, rendered
from tests.deploy.values import values_of

# Not a setting of the service: the CA bundle Python's TLS (httpx) trusts (Sense's push, the console's calls).
PROCESS_ENV = {"SSL_CERT_FILE"}
# Withheld from operators: the console's dev login (the provider's admin API) is for the local stack only, its
# assets are the image's, and plain http to named hosts is compose's (the chart has every service serve TLS).
WITHHELD = {
    "CONSOLE_DEV_LOGIN_ADMIN_URL",
    "CONSOLE_ASSETS_DIR",
    "CONSOLE_PLAIN_HTTP_HOSTS",
    "SIGNAL_PROBE_HOSTS_FILE",  # a path in the image (a pod's /etc/hosts is the kubelet's): not a chart value
}


def chart_env_names(service: str) -> set[str]:
    """What the chart sets itself: every env name of the service's pods, less the operator's `settings`."""
    names: set[str] = set()
    for name in RENDERS:
        manifest = rendered(name)
        if service not in manifest.deployments():
            continue
        workloads = [
            manifest.deployments()[service],
            *[j for s, j in manifest.migration_jobs().items() if s == service],
        ]
        for workload in workloads:
            for container in containers(workload):
                names |= set(env_of(container)) - set(values_of(name)["services"][service]["settings"])
    return names


def setting_names(service: str) -> set[str]:
    cls = SETTINGS[service]
    return {cls.env_var_name(field) for field in cls.model_fields}


@pytest.mark.parametrize("service", tuple(SETTINGS))
def test_the_chart_sets_only_real_settings_and_every_required_one(service: str) -> None:
    cls = SETTINGS[service]
    names = chart_env_names(service)
    assert names - PROCESS_ENV <= setting_names(service)
    required = {cls.env_var_name(f) for f, info in cls.model_fields.items() if info.is_required()}
    renders = [name for name in RENDERS if service in rendered(name).deployments()]
    assert renders  # every service is rendered by one of them at least
    for name in renders:
        (container,) = containers(rendered(name).deployments()[service])
        assert required <= set(env_of(container)), name


@pytest.mark.parametrize("service", tuple(SETTINGS))
def test_the_schema_allows_exactly_the_settings_the_chart_leaves_to_the_operator(service: str) -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    allowed = set(
        schema["properties"]["services"]["properties"][service]["properties"]["settings"]["propertyNames"][
            "enum"
        ]
    )
    cls = SETTINGS[service]
    # the instance id is generated per process, or (media-worker) the pod's name: never one for all replicas
    managed = chart_env_names(service) | {cls.env_var_name("instance_id")} | WITHHELD
    assert allowed == setting_names(service) - managed
    assert not any(name.endswith("_FILE") or name.endswith("_FILES") for name in allowed)
