"""Tracing and scraping in the chart (issue 27): `tracing.otlpEndpoint` and `tracing.samplingRatio` reach
every service and the console as their <P>_TRACING_* settings, and the collector egress opens, only while the
endpoint is set; the migration Jobs never get them (`migrate` makes no span). The schema takes an endpoint
and a ratio exactly where the services do, and no service's `settings` may set them. Prometheus reaches every
pod by the ServiceMonitor or, without the operator, by the prometheus.io annotations."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError
from pydantic_settings import SettingsConfigDict

from tests.deploy.chart import (
    CHART,
    PRODUCTION_VALUES,
    RELEASE,
    REQUIRED_VALUES,
    SETTINGS,
    Manifest,
    Obj,
    canonical,
    containers,
    env_of,
    helm,
    pod_spec,
    render,
    render_text,
    validate,
)
from tests.deploy.renders import RENDERS, rendered
from tests.deploy.values import enabled_services, values_of
from yovision_platform.settings import TRACING_ENDPOINT_MAX_CHARS, BaseWebSettings, Port

SCHEMA_REFUSED = "values don't meet the specifications of the schema"
TRACING_SETTINGS = ("TRACING_OTLP_ENDPOINT", "TRACING_SAMPLING_RATIO")
TRACED = [name for name in RENDERS if values_of(name)["tracing"]["otlpEndpoint"]]
UNTRACED = [name for name in RENDERS if name not in TRACED]
SCRAPE = {"monitoring.scrapeAnnotations.enabled": "true"}


class Probe(BaseWebSettings):
    """The services' settings base, as the tables below ask it: would a service start with this value?"""

    model_config = SettingsConfigDict(env_prefix="YOVISION_CHART_PROBE_")
    http_port: Port = 18000


def services_take(**tracing: Any) -> bool:
    try:
        Probe(**tracing)
    except ValidationError:
        return False
    return True


def tracing_env(workload: Obj) -> dict[str, str]:
    return {
        name: entry.get("value", "")
        for container in containers(workload)
        for name, entry in env_of(container).items()
        if "_TRACING_" in name
    }


def collector_rule(name: str) -> str:
    rule = values_of(name)["networkPolicy"]["tracing"]
    return canonical({"to": rule["to"], "ports": rule["ports"]} if rule["to"] else {"ports": rule["ports"]})


def test_both_tracing_states_are_rendered() -> None:
    assert UNTRACED == ["default"]  # values.yaml: tracing off
    assert "production" in TRACED  # the production-like values: an in-cluster collector
    assert "console" in enabled_services("production")


@pytest.mark.parametrize("name", UNTRACED)
def test_tracing_off_renders_no_tracing_setting_and_no_collector_egress(name: str) -> None:
    manifest = rendered(name)
    for workload in manifest.of_kind("Deployment") + manifest.of_kind("Job"):
        assert tracing_env(workload) == {}, workload["metadata"]["name"]
    for policy in manifest.of_kind("NetworkPolicy"):
        egress = [canonical(rule) for rule in policy["spec"].get("egress", [])]
        assert collector_rule(name) not in egress, policy["metadata"]["name"]


@pytest.mark.parametrize("name", TRACED)
@pytest.mark.parametrize("service", tuple(SETTINGS))
def test_tracing_on_reaches_every_service_as_its_settings(
    name: str, service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rendered, then loaded from the environment by the services' settings base as at start-up."""
    tracing = values_of(name)["tracing"]
    cls = SETTINGS[service]
    prefix = cls.model_config.get("env_prefix", "")
    env = tracing_env(rendered(name).deployments()[service])
    assert set(env) == {prefix + setting for setting in TRACING_SETTINGS}

    class Loaded(BaseWebSettings):
        model_config = SettingsConfigDict(env_prefix=prefix)
        http_port: Port = 18000

    for setting, value in env.items():
        monkeypatch.setenv(setting, value)
    loaded = Loaded()
    assert loaded.tracing_otlp_endpoint == tracing["otlpEndpoint"]
    assert loaded.tracing_sampling_ratio == tracing["samplingRatio"]


@pytest.mark.parametrize("name", TRACED)
def test_tracing_on_opens_the_collector_to_every_service_and_not_to_the_migrations(name: str) -> None:
    manifest = rendered(name)
    for service, policy in manifest.network_policies().items():
        egress = [canonical(rule) for rule in policy["spec"]["egress"]]
        assert egress.count(collector_rule(name)) == 1, service
    assert set(manifest.network_policies()) == enabled_services(name)  # the console's included
    (migrate,) = [p for p in manifest.of_kind("NetworkPolicy") if p["metadata"]["name"].endswith("-migrate")]
    assert collector_rule(name) not in [canonical(rule) for rule in migrate["spec"]["egress"]]
    jobs = manifest.migration_jobs()
    assert jobs  # the case is rendered
    for job in jobs.values():
        assert tracing_env(job) == {}, job["metadata"]["name"]


# An endpoint: (value, whether the services take it). The schema must agree with the settings on each.
SHORTEST_PREFIX = "https://otlp.example.com/"
ENDPOINTS = [
    ("http://otel-collector.observability.svc:4318", True),
    ("https://otlp.example.com", True),
    ("HTTPS://otlp.example.com/otlp/", True),  # a scheme in capitals; a path in front of /v1/traces
    ("http://10.0.0.7:4318", True),
    ("http://[fd00::7]:4318", True),
    (SHORTEST_PREFIX + "p" * (TRACING_ENDPOINT_MAX_CHARS - len(SHORTEST_PREFIX)), True),  # the longest
    (SHORTEST_PREFIX + "p" * (TRACING_ENDPOINT_MAX_CHARS + 1 - len(SHORTEST_PREFIX)), False),  # one over
    ("ftp://otlp.example.com", False),
    ("https://user:pw@otlp.example.com", False),
    ("https://token@otlp.example.com", False),
    ("https://otlp.example.com/?key=abc", False),
    ("https://otlp.example.com/#spans", False),
    ("otlp.example.com:4318", False),
    ("http://:4318", False),
]


def render_with(tmp_path: Path, tracing: Mapping[str, object]) -> str:
    """`helm template` with these tracing values (a values file: `--set` would make a ratio a string);
    the schema's refusal, or "" when the values are taken."""
    values_file = tmp_path / "tracing.yaml"
    values_file.write_text(yaml.safe_dump({"tracing": dict(tracing)}))
    result = render_text([values_file])
    return "" if result.returncode == 0 else result.stderr


@pytest.mark.parametrize(("endpoint", "taken"), ENDPOINTS, ids=[e[:48] for e, _ in ENDPOINTS])
def test_the_schema_takes_an_endpoint_exactly_where_the_services_do(
    endpoint: str, taken: bool, tmp_path: Path
) -> None:
    assert services_take(tracing_otlp_endpoint=endpoint) == taken  # the table states the services' rule
    refusal = render_with(tmp_path, {"otlpEndpoint": endpoint})
    if taken:
        assert refusal == ""
    else:
        assert SCHEMA_REFUSED in refusal and "/tracing/otlpEndpoint" in refusal


# A ratio at, just under and just over each end of 0..1.
RATIOS = [(0, True), (-0.001, False), (0.001, True), (1, True), (0.999, True), (1.001, False)]


@pytest.mark.parametrize(("ratio", "taken"), RATIOS, ids=[str(r) for r, _ in RATIOS])
def test_the_schema_takes_a_ratio_exactly_where_the_services_do(
    ratio: float, taken: bool, tmp_path: Path
) -> None:
    assert services_take(tracing_sampling_ratio=ratio) == taken
    refusal = render_with(tmp_path, {"otlpEndpoint": "http://otel:4318", "samplingRatio": ratio})
    if taken:
        assert refusal == ""
    else:
        assert SCHEMA_REFUSED in refusal and "/tracing/samplingRatio" in refusal


def test_a_ratio_is_given_by_set_json_as_a_number_and_by_set_refused_as_a_string() -> None:
    """As the values and the runbook say: `--set` makes 0.25 the string "0.25", which the schema refuses."""
    base = ["template", RELEASE, str(CHART), "--namespace", "yovision", "--values", str(REQUIRED_VALUES)]
    as_string = helm(*base, "--set", "tracing.samplingRatio=0.25")
    assert as_string.returncode != 0 and "/tracing/samplingRatio" in as_string.stderr
    as_number = helm(
        *base, "--set", "tracing.otlpEndpoint=http://otel:4318", "--set-json", "tracing.samplingRatio=0.25"
    )
    assert as_number.returncode == 0, as_number.stderr
    assert 'name: SENSE_TRACING_SAMPLING_RATIO\n              value: "0.25"\n' in as_number.stdout


@pytest.mark.parametrize("setting", ["BELL_TRACING_SAMPLING_RATIO", "CONSOLE_TRACING_OTLP_ENDPOINT"])
def test_no_service_sets_its_own_tracing_through_settings(setting: str) -> None:
    """Tracing is the release's: a per-service override is refused at install, naming the setting."""
    service = next(
        s for s, cls in SETTINGS.items() if setting.startswith(cls.model_config.get("env_prefix", ""))
    )
    result = render_text(settings={f"services.{service}.settings.{setting}": "1"})
    assert result.returncode != 0
    assert SCHEMA_REFUSED in result.stderr and setting in result.stderr


def scrape_annotations(manifest: Manifest) -> dict[str, dict[str, str]]:
    return {
        service: {
            key: value
            for key, value in deployment["spec"]["template"]["metadata"].get("annotations", {}).items()
            if key.startswith("prometheus.io/")
        }
        for service, deployment in manifest.deployments().items()
    }


@pytest.mark.parametrize("name", RENDERS)
def test_no_scrape_annotation_unless_asked_for(name: str) -> None:
    assert not values_of(name)["monitoring"]["scrapeAnnotations"]["enabled"]
    assert not any(scrape_annotations(rendered(name)).values())


OWN_PATH = {"services.bell-receiver.podAnnotations.prometheus\\.io/path": "/own"}


@pytest.mark.parametrize(
    ("values_files", "settings", "paths"),
    [
        ((PRODUCTION_VALUES,), SCRAPE, {}),  # every service and the console, over HTTPS
        (
            (),
            {**SCRAPE, **OWN_PATH},
            {"bell-receiver": "/own"},
        ),  # plain HTTP; an annotation of the operator's
    ],
    ids=["production", "default"],
)
def test_scrape_annotations_name_every_pods_metrics_port_path_and_scheme(
    values_files: tuple[Path, ...], settings: dict[str, str], paths: dict[str, str]
) -> None:
    manifest = render(values_files, settings)
    assert validate(manifest.text).returncode == 0
    annotated = scrape_annotations(manifest)
    assert set(annotated) == enabled_services("production" if values_files else "default")
    for service, found in annotated.items():
        (container,) = pod_spec(manifest.deployments()[service])["containers"]
        (port,) = [p for p in container["ports"] if p["name"] == "http"]
        assert found == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(port["containerPort"]),
            "prometheus.io/path": paths.get(service, "/metrics"),  # podAnnotations' own value wins
            "prometheus.io/scheme": container["readinessProbe"]["httpGet"]["scheme"].lower(),
        }, service
