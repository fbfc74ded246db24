"""media-worker installed alone, migrated and serving on the real stack with the chart's environment; the
chart's preStop hook (files/media-drain.py, run as the rendered Deployment runs it) drains it and returns
only when the instance reports safe_to_stop. Unknown state is never taken for drained."""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import Stack, free_port, runtime_dsn_for
from tests.deploy.alone import Installed, host_dir
from tests.deploy.chart import containers
from tests.deploy.renders import rendered
from tests.deploy.test_service_alone import POD_NAME, image_env, pod_env
from yovision_platform.db import Identifier

pytestmark = pytest.mark.infra

START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 30.0


def prestop_command(installed: Installed, scratch: Path, timeout_seconds: int) -> list[str]:
    """The rendered preStop command, with the image's python and the drain ConfigMap's folder."""
    (container,) = containers(rendered("default").deployments()["media-worker"])
    python, script, flag, _ = container["lifecycle"]["preStop"]["exec"]["command"]
    assert (python, flag) == ("python", "--timeout-seconds")
    mounted = Path(script)
    local = host_dir(str(mounted.parent), scratch) / mounted.name
    return [str(installed.bin(python)), str(local), flag, str(timeout_seconds)]


@pytest.fixture
async def serving(
    alone: Callable[[str], Installed], stack: Stack, schema_name: Identifier, tmp_path: Path
) -> AsyncIterator[tuple[Installed, dict[str, str]]]:
    installed = alone("media-worker")
    dsn = runtime_dsn_for(stack.admin_dsn, f"{schema_name}_app", secrets.token_hex(16))
    env = (
        image_env(installed)
        | pod_env(installed, tmp_path, dsn)
        | {
            "MEDIA_HTTP_HOST": "127.0.0.1",
            "MEDIA_HTTP_PORT": str(free_port()),
            "MEDIA_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
            "MEDIA_DATABASE_SCHEMA": schema_name,
        }
    )
    migrate = installed.run(
        "media-worker",
        "migrate",
        env=env | {"MEDIA_MIGRATION_DSN_FILE": str(stack.admin_dsn_file)},
        cwd=tmp_path,
    )
    assert migrate.returncode == 0, migrate.stderr
    log = (tmp_path / "serve.log").open("w")
    serve = [str(installed.bin("media-worker")), "serve"]
    process = await asyncio.to_thread(subprocess.Popen, serve, env=env, cwd=tmp_path, stdout=log, stderr=log)
    try:
        url = f"http://127.0.0.1:{env['MEDIA_HTTP_PORT']}"
        async with httpx.AsyncClient(base_url=url, timeout=2.0) as client:
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            while True:
                assert process.poll() is None, (tmp_path / "serve.log").read_text()
                try:
                    if (await client.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "media-worker did not become ready"
                await asyncio.sleep(0.2)
        yield installed, env
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, STOP_TIMEOUT_SECONDS)
        log.close()
        assert code == 0, (tmp_path / "serve.log").read_text()


async def test_the_prestop_hook_drains_the_instance_before_it_stops(
    serving: tuple[Installed, dict[str, str]], tmp_path: Path
) -> None:
    installed, env = serving
    command = prestop_command(installed, tmp_path, timeout_seconds=30)
    result = await asyncio.to_thread(
        subprocess.run, command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.splitlines()[-1])["drain"]
    assert report["safe_to_stop"] is True
    assert report["draining"] is True
    assert report["instance_id"] == report["capability_instance_id"] == POD_NAME
    key = await asyncio.to_thread(Path(env["MEDIA_AUTH_JWT_KEY_FILE"]).read_text)
    assert key.strip() not in result.stdout + result.stderr  # the drain reports only


async def test_the_prestop_hook_gives_up_at_its_timeout_when_the_state_is_unknown(
    alone: Callable[[str], Installed], tmp_path: Path
) -> None:
    installed = alone("media-worker")
    env = image_env(installed) | pod_env(installed, tmp_path) | {"MEDIA_HTTP_PORT": str(free_port())}
    started = time.monotonic()
    result = await asyncio.to_thread(
        subprocess.run,
        prestop_command(installed, tmp_path, timeout_seconds=3),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1, result.stderr  # nothing answered: not drained
    assert all(json.loads(line) == {"drain": None} for line in result.stdout.splitlines())
    assert time.monotonic() - started < 3 + 5 + 2  # the timeout, one request timeout, start-up
