"""The Helm chart as the tests see it: `helm template` of infra/helm/yovision, strictly validated by
k8s-validate, parsed into plain objects. helm and k8s-validate are built by `make test`'s set-up
(infra/scripts/install-helm.sh, install-k8s-validate.sh)."""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bell_receiver.settings import BellReceiverSettings
from console.settings import ConsoleSettings
from media_worker.settings import MediaWorkerSettings
from orphan_scanner.settings import OrphanScannerSettings
from sense_reconciler.settings import SenseReconcilerSettings
from signal_watcher.settings import SignalWatcherSettings
from yovision_platform.settings import BaseServiceSettings, BaseWebSettings

__all__ = [
    "CHART",
    "DATABASE_SETTINGS",
    "PRODUCTION_VALUES",
    "REQUIRED_VALUES",
    "SETTINGS",
    "Manifest",
    "canonical",
    "containers",
    "env_of",
    "helm",
    "pod_spec",
    "render",
    "render_text",
    "validate",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "infra" / "helm" / "yovision"
PRODUCTION_VALUES = CHART / "values-production.yaml"
# The values an install must give (auth.issuer): passed first, so a values file or --set value overrides them.
REQUIRED_VALUES = Path(__file__).resolve().parent / "values-required.yaml"
BIN_DIR = REPO_ROOT / ".local" / "bin"
HELM = BIN_DIR / "helm"
K8S_VALIDATE = BIN_DIR / "k8s-validate"
RELEASE = "yov"

DATABASE_SETTINGS: dict[str, type[BaseServiceSettings]] = {
    "sense-reconciler": SenseReconcilerSettings,
    "orphan-scanner": OrphanScannerSettings,
    "bell-receiver": BellReceiverSettings,
    "signal-watcher": SignalWatcherSettings,
    "media-worker": MediaWorkerSettings,
}
SETTINGS: dict[str, type[BaseWebSettings]] = {**DATABASE_SETTINGS, "console": ConsoleSettings}

Obj = dict[str, Any]


def _tool(path: Path, script: str) -> str:
    assert path.is_file(), f"{path.name} missing: `make test` builds it (infra/scripts/{script})"
    return str(path)


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    command = [_tool(HELM, "install-helm.sh"), *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO_ROOT)


def validate(manifests: str) -> subprocess.CompletedProcess[str]:
    """k8s-validate over a YAML stream (exit 0: every document decoded strictly)."""
    command = [_tool(K8S_VALIDATE, "install-k8s-validate.sh")]
    return subprocess.run(command, input=manifests, capture_output=True, text=True, check=False)


@dataclass(frozen=True)
class Manifest:
    """One render of the chart: its text and its objects."""

    text: str
    objects: tuple[Obj, ...]

    def of_kind(self, kind: str) -> list[Obj]:
        return [o for o in self.objects if o["kind"] == kind]

    def named(self, kind: str, name: str) -> Obj:
        matches = [o for o in self.of_kind(kind) if o["metadata"]["name"] == name]
        assert len(matches) == 1, f"{kind}/{name}: {len(matches)} objects"
        return matches[0]

    def deployments(self) -> dict[str, Obj]:
        """Deployments by service name (their `app.kubernetes.io/component` label)."""
        return {d["metadata"]["labels"]["app.kubernetes.io/component"]: d for d in self.of_kind("Deployment")}

    def migration_jobs(self) -> dict[str, Obj]:
        jobs = self.of_kind("Job")
        return {
            j["metadata"]["labels"]["app.kubernetes.io/component"].removesuffix("-migrate"): j for j in jobs
        }

    def network_policies(self) -> dict[str, Obj]:
        return {
            p["metadata"]["labels"]["app.kubernetes.io/component"]: p
            for p in self.of_kind("NetworkPolicy")
            if "app.kubernetes.io/component" in p["metadata"]["labels"]
        }


def render_text(
    values_files: Sequence[Path] = (), settings: Mapping[str, str] = {}, release: str = RELEASE
) -> subprocess.CompletedProcess[str]:
    """`helm template` with the required values, then values files and `--set` values (helm parses `true`
    and numbers as such)."""
    args = ["template", release, str(CHART), "--namespace", "yovision"]
    for path in (REQUIRED_VALUES, *values_files):
        args += ["--values", str(path)]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    return helm(*args)


@functools.cache
def _render_cached(
    values_files: tuple[Path, ...], settings: tuple[tuple[str, str], ...], release: str
) -> Manifest:
    result = render_text(values_files, dict(settings), release)
    assert result.returncode == 0, result.stderr
    objects = tuple(o for o in yaml.safe_load_all(result.stdout) if o)
    return Manifest(result.stdout, objects)


def render(
    values_files: Sequence[Path] = (), settings: Mapping[str, str] = {}, release: str = RELEASE
) -> Manifest:
    """`helm template` (cached per arguments); fails the test when helm refuses the values."""
    return _render_cached(tuple(values_files), tuple(sorted(settings.items())), release)


def containers(pod_owner: Obj) -> Iterator[Obj]:
    spec = pod_owner["spec"]["template"]["spec"]
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def pod_spec(pod_owner: Obj) -> Obj:
    spec: Obj = pod_owner["spec"]["template"]["spec"]
    return spec


def env_of(container: Obj) -> dict[str, Obj]:
    return {entry["name"]: entry for entry in container.get("env", [])}


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True)
