"""media-worker installed alone, migrated and serving on the real stack with the chart's environment, its
issuer a real ORY Hydra; the chart's preStop hook (files/media-drain.py, run as the rendered Deployment runs
it) gets a `client_credentials` token there as the drain client, drains the instance (over plain HTTP, or
over HTTPS with a certificate that does not name 127.0.0.1) and returns only when it reports safe_to_stop.
Unknown state, or a client the issuer refuses, is never taken for drained."""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.deploy.alone import Installed, host_dir
from tests.deploy.chart import containers
from tests.deploy.renders import rendered
from tests.deploy.test_service_alone import POD_NAME, image_env, pod_env
from tests.support.issuers import HydraIssuer
from tests.support.stack import Stack, free_port, runtime_dsn_for
from tests.support.tls import CertificateAuthority
from yovision_platform.storage import Identifier
from yovision_platform.tools.hydra import ClientSpec

pytestmark = pytest.mark.infra

START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 30.0
DRAIN_PERMISSION = "media:drain"


def prestop_command(installed: Installed, scratch: Path, timeout_seconds: int) -> list[str]:
    """The rendered preStop command, with the image's python, the drain ConfigMap's folder and the Secret's
    folder of the test, and `timeout_seconds`."""
    (container,) = containers(rendered("default").deployments()["media-worker"])
    python, script, *options = container["lifecycle"]["preStop"]["exec"]["command"]
    assert python == "python"
    mounted = Path(script)
    local = host_dir(str(mounted.parent), scratch) / mounted.name
    flags = dict(zip(options[::2], options[1::2], strict=True))
    assert set(flags) == {"--timeout-seconds", "--client-id", "--client-secret-file", "--scope"}
    secret = Path(flags["--client-secret-file"])
    flags["--client-secret-file"] = str(host_dir(str(secret.parent), scratch) / secret.name)
    flags["--timeout-seconds"] = str(timeout_seconds)
    return [str(installed.bin(python)), str(local), *(part for pair in flags.items() for part in pair)]


def drain_client(command: list[str]) -> tuple[ClientSpec, Path]:
    """The drain client the command names, as the issuer must know it, and its secret file."""
    flags = dict(zip(command[2::2], command[3::2], strict=True))
    spec = ClientSpec(flags["--client-id"], (flags["--scope"],), ("media-worker",))
    return spec, Path(flags["--client-secret-file"])


@dataclass(frozen=True)
class Serving:
    installed: Installed
    env: dict[str, str]
    url: str
    verify: ssl.SSLContext | bool


def instance_tls(scratch: Path) -> tuple[dict[str, str], ssl.SSLContext]:
    """A certificate as cert-manager would give the pod (for the Service's name, not 127.0.0.1), signed by
    a CA of the test, and how the test itself reaches the instance."""
    ca = CertificateAuthority.create(scratch, "services-ca")
    cert, key = ca.issue(scratch, "media-worker", ip="10.96.0.85")
    context = ssl.create_default_context(cafile=str(ca.cert))
    context.check_hostname = False
    return {"MEDIA_HTTP_TLS_CERT_FILE": str(cert), "MEDIA_HTTP_TLS_KEY_FILE": str(key)}, context


@pytest.fixture(params=["http", "https"])
async def serving(
    request: pytest.FixtureRequest,
    alone: Callable[[str], Installed],
    stack: Stack,
    hydra: HydraIssuer,
    schema_name: Identifier,
    tmp_path: Path,
) -> AsyncIterator[Serving]:
    installed = alone("media-worker")
    dsn = runtime_dsn_for(stack.admin_dsn, f"{schema_name}_app", secrets.token_hex(16))
    tls, verify = instance_tls(tmp_path) if request.param == "https" else ({}, False)
    env = (
        image_env(installed)
        | pod_env(installed, tmp_path, dsn)
        | tls
        | {
            "MEDIA_HTTP_HOST": "127.0.0.1",
            "MEDIA_HTTP_PORT": str(free_port()),
            "MEDIA_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
            "MEDIA_DATABASE_SCHEMA": schema_name,
            "MEDIA_AUTH_ISSUER": hydra.issuer,  # the chart's issuer, here a real Hydra on loopback
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
    url = f"{request.param}://127.0.0.1:{env['MEDIA_HTTP_PORT']}"
    try:
        async with httpx.AsyncClient(base_url=url, timeout=2.0, verify=verify) as client:
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
        yield Serving(installed, env, url, verify)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, STOP_TIMEOUT_SECONDS)
        log.close()
        assert code == 0, (tmp_path / "serve.log").read_text()


def run_hook(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


async def drain_state(hydra: HydraIssuer, serving: Serving) -> dict[str, object]:
    token = await hydra.machine_token("operator-cli", [DRAIN_PERMISSION], ["media-worker"])
    async with httpx.AsyncClient(base_url=serving.url, timeout=5.0, verify=serving.verify) as client:
        response = await client.get("/internal/drain", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    state: dict[str, object] = response.json()
    return state


async def test_the_prestop_hook_drains_the_instance_before_it_stops(
    serving: Serving, hydra: HydraIssuer, tmp_path: Path
) -> None:
    command = prestop_command(serving.installed, tmp_path, timeout_seconds=30)
    client, secret_file = drain_client(command)
    secret = (await asyncio.to_thread(secret_file.read_text)).strip()
    await hydra.admin.ensure_client(client, secret)  # the provider knows the drain client by its secret
    result = await asyncio.to_thread(run_hook, command, serving.env, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.splitlines()[-1])["drain"]
    assert report["safe_to_stop"] is True
    assert report["draining"] is True
    assert report["instance_id"] == report["capability_instance_id"] == POD_NAME
    assert all(set(json.loads(line)) == {"drain"} for line in result.stdout.splitlines())  # reports only
    assert secret not in result.stdout + result.stderr
    assert result.stderr == ""  # it had a token at once: nothing to explain


async def test_a_client_the_issuer_refuses_never_drains_the_instance(
    serving: Serving, hydra: HydraIssuer, tmp_path: Path
) -> None:
    command = prestop_command(serving.installed, tmp_path, timeout_seconds=3)
    client, _ = drain_client(command)
    await hydra.admin.ensure_client(client, secrets.token_urlsafe(32))  # not the secret the pod holds
    result = await asyncio.to_thread(run_hook, command, serving.env, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert all(json.loads(line) == {"drain": None} for line in result.stdout.splitlines())
    assert [json.loads(line) for line in result.stderr.splitlines()] == [
        {"no_token": "token_refused", "status": 401}  # said once, not once per poll
    ]
    assert (await drain_state(hydra, serving))["draining"] is False  # nothing changed


async def test_the_prestop_hook_gives_up_at_its_timeout_when_the_state_is_unknown(
    alone: Callable[[str], Installed], tmp_path: Path
) -> None:
    """No instance and no issuer answer: not drained, after the timeout and not much later."""
    installed = alone("media-worker")
    env = (
        image_env(installed)
        | pod_env(installed, tmp_path)
        | {"MEDIA_HTTP_PORT": str(free_port()), "MEDIA_AUTH_ISSUER": f"http://127.0.0.1:{free_port()}"}
    )
    started = time.monotonic()
    command = prestop_command(installed, tmp_path, timeout_seconds=3)
    result = await asyncio.to_thread(run_hook, command, env, tmp_path)
    assert result.returncode == 1, result.stderr
    assert all(json.loads(line) == {"drain": None} for line in result.stdout.splitlines())
    assert [json.loads(line) for line in result.stderr.splitlines()] == [
        {"no_token": "issuer_unavailable", "status": None}
    ]
    assert time.monotonic() - started < 3 + 5 + 2  # the timeout, one request timeout, start-up


@pytest.mark.parametrize("missing", ["MEDIA_AUTH_ISSUER", "--client-secret-file"])
async def test_a_hook_that_cannot_authenticate_stops_at_once(
    missing: str, alone: Callable[[str], Installed], tmp_path: Path
) -> None:
    """Waiting cannot fix a missing issuer or secret: exit 2 at once, naming it (never a value)."""
    installed = alone("media-worker")
    env = image_env(installed) | pod_env(installed, tmp_path) | {"MEDIA_HTTP_PORT": str(free_port())}
    command = prestop_command(installed, tmp_path, timeout_seconds=600)
    if missing == "MEDIA_AUTH_ISSUER":
        env[missing] = "http://login.example.com"  # plain http off loopback: as refused as none at all
    else:
        await asyncio.to_thread(drain_client(command)[1].unlink)
    started = time.monotonic()
    result = await asyncio.to_thread(run_hook, command, env, tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == f"media-drain: not configured: {missing}"
    assert result.stdout == ""
    assert time.monotonic() - started < 10  # not the 600 s
