"""`helm lint` and `helm template` of infra/helm/yovision (default and production-like values), every
rendered object decoded strictly with the Kubernetes API types, and a values schema that refuses wrong
values at install time. The validator itself is shown to refuse what an API server would."""

from __future__ import annotations

import re

import pytest

from tests.deploy.chart import (
    CHART,
    PRODUCTION_VALUES,
    REPO_ROOT,
    REQUIRED_VALUES,
    helm,
    render,
    render_text,
    validate,
)
from tests.deploy.renders import RENDERS, rendered


def test_helm_is_the_pinned_version() -> None:
    pinned = re.search(r"^HELM_VERSION=(\S+)$", (REPO_ROOT / "infra/versions.env").read_text(), re.M)
    assert pinned is not None
    assert helm("version", "--short").stdout.split("+")[0].strip() == pinned.group(1)


@pytest.mark.parametrize("values", [[REQUIRED_VALUES], [PRODUCTION_VALUES]], ids=["default", "production"])
def test_helm_lint_passes(values: list[str]) -> None:
    args = ["lint", str(CHART), "--strict", *(f"--values={v}" for v in values)]
    result = helm(*args)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", RENDERS)
def test_every_rendered_object_decodes_strictly(name: str) -> None:
    manifest = rendered(name)
    result = validate(manifest.text)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\nok ") + result.stdout.startswith("ok ") == len(manifest.objects)


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: web:1
          ports: [{name: http, containerPort: 8080}]
          env: [{name: WEB_PORT, value: "8080"}]
          readinessProbe: {httpGet: {path: /readyz, port: http}}
"""


def test_the_validator_accepts_a_valid_deployment() -> None:
    result = validate(DEPLOYMENT)
    assert (result.returncode, result.stdout) == (0, "ok Deployment/web\n"), result.stderr


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("  replicas: 2", "  replicas: 2\n  replica: 3"), 'unknown field "spec.replica"'),
        (("  replicas: 2", '  replicas: "2"'), "cannot unmarshal string"),
        (("  replicas: 2", "  replicas: 2\n  replicas: 3"), 'key "replicas" already set'),
        (("kind: Deployment", "kind: Deploymnt"), 'no kind "Deploymnt"'),
        (("name: web, labels", "name: Web_1, labels"), "metadata.name"),
        (("{labels: {app: web}}", "{labels: {app: api}}"), "does not match template"),
        (("port: http}}", "port: web}}"), "no such named container port"),
        (("name: WEB_PORT", "name: WEB PORT"), "env[0].name"),
        (("containerPort: 8080", "containerPort: 80800"), "containerPort"),
        (
            ("image: web:1", "image: web:1\n          resources: {limits: {memory: lots}}"),
            "quantities must match",
        ),
    ],
    ids=[
        "unknown-field",
        "wrong-type",
        "duplicate-field",
        "unknown-kind",
        "bad-name",
        "selector-mismatch",
        "probe-port",
        "env-name",
        "port-range",
        "quantity",
    ],
)
def test_the_validator_refuses_what_an_api_server_refuses(change: tuple[str, str], problem: str) -> None:
    old, new = change
    assert old in DEPLOYMENT
    result = validate(DEPLOYMENT.replace(old, new, 1))
    assert result.returncode == 1
    assert problem in result.stderr


def test_the_validator_checks_every_document_of_a_stream() -> None:
    broken = DEPLOYMENT.replace("web", "second").replace("  replicas: 2", "  replicas: 2\n  paused: yes-no")
    result = validate(DEPLOYMENT + "---\n# nothing\n---\n" + broken)
    assert result.returncode == 1
    assert result.stdout == "ok Deployment/web\n"
    assert "Deployment/second" in result.stderr


@pytest.mark.parametrize(
    ("setting", "problem"),
    [
        ("services.sense-reconciler.replicas=0", "/services/sense-reconciler/replicas"),
        ("services.media-worker.drain.timeoutSeconds=5", "/services/media-worker/drain/timeoutSeconds"),
        ("kafka.bootstrap=kafka", "/kafka/bootstrap"),
        ("kafka.prefix=Prod", "/kafka/prefix"),
        ("auth.leewaySeconds=61", "/auth/leewaySeconds"),
        ("auth.algorithms={HS256}", "/auth/algorithms"),
        ("services.console.oidc.clientId=a b", "/services/console/oidc/clientId"),
        ("services.media-worker.drain.clientId=", "/services/media-worker/drain/clientId"),
        ("services.bell-receiver.settings.BELL_DATABASE_DSN_FILE=/x", "BELL_DATABASE_DSN_FILE"),
        ("services.bell-receiver.settings.BELL_LOG_LEVL=DEBUG", "BELL_LOG_LEVL"),
        ("services.signal-watcher.settings.SIGNAL_INSTANCE_ID=one", "SIGNAL_INSTANCE_ID"),
        ("services.signal-watcher.resources.limits.memory=lots", "/services/signal-watcher/resources/limits"),
        ("services.orphan-scanner.resources.limits=null", "/services/orphan-scanner/resources"),
        ("services.sense-reconciler.bellRelay.enabled=true", "/services/sense-reconciler/bellRelay"),
        ("services.media-worker.storage.accessModes={ReadWriteOnce}", "/services/media-worker/storage"),
        ("networkPolicy.probeTargets.to=null", "/networkPolicy/probeTargets"),
        ("shutdownGraceSeconds=10", "/shutdownGraceSeconds"),
        ("sevices.bell-receiver.replicas=2", "sevices"),
    ],
)
def test_the_values_schema_refuses_wrong_values(setting: str, problem: str) -> None:
    key, _, value = setting.partition("=")
    result = render_text(settings={key: value})
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert problem in result.stderr


def test_relay_needs_an_https_url() -> None:
    settings = {
        "services.sense-reconciler.bellRelay.enabled": "true",
        "services.sense-reconciler.bellRelay.keyId": "relay-1",
        "services.sense-reconciler.bellRelay.url": "http://bell-receiver:18083",
    }
    result = render_text(settings=settings)
    assert result.returncode != 0
    assert "/services/sense-reconciler/bellRelay/url" in result.stderr


@pytest.mark.parametrize("release", ["a-53-character-release-name-which-helm-still-accepts", "y", "on"])
def test_any_release_name_renders_valid_names_and_labels(release: str) -> None:
    """The longest name Helm accepts, and names YAML 1.1 would read as booleans in an unquoted label."""
    manifest = render([PRODUCTION_VALUES], release=release)
    for obj in manifest.objects:
        assert len(obj["metadata"]["name"]) <= 63
    for deployment in manifest.of_kind("Deployment"):
        # pods are <deployment>-<hash, up to 10>-<5>: media-worker's pod name is its MEDIA_INSTANCE_ID (<= 63)
        assert len(deployment["metadata"]["name"]) + 17 <= 63
    assert validate(manifest.text).returncode == 0


def test_relay_without_a_url_needs_bell_to_serve_tls() -> None:
    settings = {
        "services.sense-reconciler.bellRelay.enabled": "true",
        "services.sense-reconciler.bellRelay.keyId": "relay-1",
    }
    result = render_text(settings=settings)
    assert result.returncode != 0
    assert "unless bell-receiver serves TLS" in result.stderr
    tls = render_text(settings={**settings, "services.bell-receiver.tls.secretName": "bell-tls"})
    assert tls.returncode == 0, tls.stderr
