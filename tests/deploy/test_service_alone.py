"""What each image would contain actually runs, without Docker: every service installed alone as its
Dockerfile installs it (tests/deploy/alone.py) answers `--help` and passes `check-config` with exactly the
environment and secret-file layout the chart gives its pod, imports nothing from the workspace, and holds no
other service. A dependency that works only because the workspace happens to have it fails here."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.deploy.alone import Installed, chart_env, host_dir, secret_files, secret_keys
from tests.deploy.chart import REPO_ROOT, SETTINGS, containers
from tests.deploy.renders import rendered

PACKAGES = {
    "sense-reconciler": "sense_reconciler",
    "orphan-scanner": "orphan_scanner",
    "bell-receiver": "bell_receiver",
    "signal-watcher": "signal_watcher",
    "media-worker": "media_worker",
    "console": "console",
}
# Console scripts on the image's PATH besides the service itself (Dockerfile comments name them).
EXTRA_SCRIPTS = {"orphan-scanner": ["sense-orphan"]}
POD_NAME = "yov-yovision-media-worker-5d8f9c7b6-x2x7k"


@pytest.fixture(params=tuple(SETTINGS))
def installed(request: pytest.FixtureRequest, alone: Callable[[str], Installed]) -> Installed:
    return alone(request.param)


def image_env(installed: Installed) -> dict[str, str]:
    """The process environment of the image: its PATH first, the schemas it copies, nothing of the repo's."""
    return {
        "PATH": f"{installed.venv / 'bin'}:/usr/bin:/bin",
        "HOME": "/nonexistent",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "YOVISION_SCHEMAS_DIR": str(REPO_ROOT / "schemas"),
    }


def pod_env(
    installed: Installed, scratch: Path, dsn: str = "postgresql://app:pw@db.example:5432/yovision"
) -> dict[str, str]:
    """The chart's env of the service's Deployment (default values; the console: the production file, as it
    is off by default), its secret files made in `scratch`."""
    render = "production" if installed.service == "console" else "default"
    deployment = rendered(render).deployments()[installed.service]
    for mount, keys in secret_keys(deployment).items():
        secret_files(host_dir(mount, scratch), keys, dsn)
    (container,) = containers(deployment)
    return chart_env(container, scratch, POD_NAME)


def test_the_service_answers_help(installed: Installed, tmp_path: Path) -> None:
    result = installed.run(installed.service, "--help", env=image_env(installed), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for command in ("serve", "migrate", "check-config"):
        assert command in result.stdout
    for script in EXTRA_SCRIPTS.get(installed.service, []):
        extra = installed.run(script, "--help", env=image_env(installed), cwd=tmp_path)
        assert extra.returncode == 0, extra.stderr


def test_the_service_accepts_the_charts_configuration(installed: Installed, tmp_path: Path) -> None:
    env = image_env(installed) | pod_env(installed, tmp_path)
    result = installed.run(installed.service, "check-config", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["service"], report["config"]) == (installed.service, "ok")
    if installed.service == "media-worker":
        assert report["instance_id"] == POD_NAME  # the chart's fixed id per pod is a valid instance id


def test_check_config_refuses_a_missing_secret_file(installed: Installed, tmp_path: Path) -> None:
    env = image_env(installed) | pod_env(installed, tmp_path)
    first_file = "session_key_file" if installed.service == "console" else "database_dsn_file"
    setting = SETTINGS[installed.service].env_var_name(first_file)
    os.remove(env[setting])
    result = installed.run(installed.service, "check-config", env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert setting in result.stderr


def test_the_service_runs_from_its_own_virtualenv_only(installed: Installed, tmp_path: Path) -> None:
    own = PACKAGES[installed.service]
    others = [p for s, p in PACKAGES.items() if s != installed.service]
    probe = (
        "import importlib.util, json, sys; import yovision_platform, " + own + "; "
        "print(json.dumps({'files': [yovision_platform.__file__, " + own + ".__file__], 'path': sys.path, "
        "'others': [m for m in " + repr(others) + " if importlib.util.find_spec(m)]}))"
    )
    result = installed.run("python", "-c", probe, env=image_env(installed), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    site_packages = str(installed.venv / "lib")
    assert all(path.startswith(site_packages) for path in found["files"])  # wheels, not editable sources
    assert not any(entry.startswith(str(REPO_ROOT)) for entry in found["path"])
    assert found["others"] == []  # one service per image
