"""A service installed alone, the way its Dockerfile installs it: the Dockerfile's build context (its COPY
sources) in a scratch folder, its `uv sync --frozen --no-dev --no-editable --package <service>` into a fresh
virtualenv, then the sources removed, as the image's final stage has none. What runs from that virtualenv
can only use what the service's own dependencies brought."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.deploy.chart import CHART, REPO_ROOT, Obj, containers, env_of
from tests.deploy.dockerfiles import dockerfile
from yovision_platform.tools.localhost import write_private_file

__all__ = ["Installed", "chart_env", "install_alone", "secret_files"]

IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules")  # as .dockerignore
UV = REPO_ROOT / ".local" / "tools" / "uv-venv" / "bin" / "uv"
# The container paths of the chart, and where a test puts them (longest first: one is a prefix of another).
CONTAINER_DIRS = (
    "/run/secrets/yovision-admin",
    "/run/secrets/yovision",
    "/var/lib/yovision/media",
    "/run/yovision",
    "/etc/yovision/drain",
)


@dataclass(frozen=True)
class Installed:
    service: str
    venv: Path

    def bin(self, name: str) -> Path:
        return self.venv / "bin" / name

    def run(self, *args: str, env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin(args[0])), *args[1:]],
            env=dict(env),
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )


# A bytecode prefix (the Makefile's) would take uv's compiled bytecode out of the image's virtualenv.
INHERITED_NOT = frozenset({"VIRTUAL_ENV", "PYTHONPATH", "PYTHONPYCACHEPREFIX"})


def install_alone(service: str, scratch: Path) -> Installed:
    image = dockerfile(service)
    source = scratch / "src"
    for path, destination in image.build_copies:  # COPY semantics, relative to WORKDIR
        origin = REPO_ROOT / path
        if origin.is_dir():  # a directory's contents go into the destination
            shutil.copytree(origin, source / destination, dirs_exist_ok=True, ignore=IGNORED)
        else:  # a file goes into a destination ending in "/", or becomes it
            target = source / destination / origin.name if destination.endswith("/") else source / destination
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, target)
    venv = scratch / "venv"
    env = {  # uv's settings as for `make setup`, a fresh target
        **{k: v for k, v in os.environ.items() if k not in INHERITED_NOT},
        "UV_PROJECT_ENVIRONMENT": str(venv),
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_PROGRESS": "1",
        "UV_COMPILE_BYTECODE": "1",  # as the image: its processes start from bytecode
        # from uv's cache only: `make setup` synced the whole workspace from the same lock (build backend
        # included), so the service's locked subset is there; the suite never depends on the registry
        "UV_OFFLINE": "1",
    }
    sync = image.final_uv_sync
    command = [
        str(UV),
        *sync[1:],
        "--python",
        getattr(sys, "_base_executable", sys.executable),
    ]  # the machine's Python 3.11
    result = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    shutil.rmtree(source)  # the image's final stage holds the virtualenv only
    return Installed(service, venv)


def secret_files(directory: Path, keys: list[str], dsn: str) -> None:
    """Throwaway secret files in the services' formats: a DSN, an operator token, hex keys (0600)."""
    for key in keys:
        if key == "database-dsn":
            content = dsn
        elif key == "api-token":
            content = secrets.token_urlsafe(32)
        elif key.startswith("mediamtx-") and key.endswith("credentials"):  # a MediaMTX API user
            content = f"yovision:{secrets.token_urlsafe(24)}"
        else:  # JWT, AES and relay keys: hex of 32 random bytes
            content = secrets.token_hex(32)
        write_private_file(directory / key, content + "\n")


def chart_env(container: Obj, scratch: Path, instance_id: str) -> dict[str, str]:
    """The container's env from the rendered chart, with its container paths moved under `scratch`."""
    env: dict[str, str] = {}
    for name, entry in env_of(container).items():
        if "valueFrom" in entry:
            assert entry["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
            env[name] = instance_id
            continue
        value = entry["value"]
        for directory in CONTAINER_DIRS:
            value = value.replace(directory, str(host_dir(directory, scratch)))
        env[name] = value
    return env


def host_dir(container_dir: str, scratch: Path) -> Path:
    if container_dir == "/etc/yovision/drain":
        return CHART / "files"
    return scratch / container_dir.strip("/").replace("/", "-")


def secret_keys(workload: Obj) -> dict[str, list[str]]:
    """Mount path -> keys of every Secret volume the workload's container mounts."""
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
    (container,) = containers(workload)
    return {
        m["mountPath"]: [item["key"] for item in volumes[m["name"]]["secret"]["items"]]
        for m in container["volumeMounts"]
        if "secret" in volumes[m["name"]]
    }
