"""signal-watcher as a real process: refuses to start without its keys or its issuer; serves the API to the
access tokens of a real OpenID provider (the session's private ORY Hydra) for its audience only."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from signal_watcher.settings import AUDIENCE
from tests.support.fixture_server import FixtureServer
from tests.support.issuers import HydraIssuer
from tests.support.stack import Stack, free_port, private_file, problem_code, runtime_dsn_for
from yovision_platform.storage import Identifier
from yovision_platform.tools.environment import TEST_PROBE_ONLY_NETWORKS, TEST_PROBE_RESOLVER

PROCESS = Path(__file__).with_name("service_process.py")
REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def env(stack: Stack, hydra: HydraIssuer, schema_name: Identifier, tmp_path: Path) -> dict[str, str]:
    password = secrets.token_hex(16)
    return {
        **os.environ,
        "YOVISION_TEST_SIGNAL_SCHEMA": str(schema_name),
        "SIGNAL_HTTP_PORT": str(free_port()),
        "SIGNAL_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
        "SIGNAL_OUTBOX_RELAY_ENABLED": "false",
        "SIGNAL_DATABASE_DSN_FILE": str(
            private_file(
                tmp_path / "runtime.dsn",
                runtime_dsn_for(stack.admin_dsn, f"{schema_name}_app", password) + "\n",
            )
        ),
        "SIGNAL_MIGRATION_DSN_FILE": str(private_file(tmp_path / "admin.dsn", stack.admin_dsn + "\n")),
        "SIGNAL_SECRETS_AES_KEY_FILE": str(private_file(tmp_path / "aes.key", secrets.token_hex(32) + "\n")),
        "SIGNAL_AUTH_ISSUER": hydra.issuer,
        "SIGNAL_PROBE_ONLY_NETWORKS": TEST_PROBE_ONLY_NETWORKS,  # as every test environment
        "SIGNAL_PROBE_RESOLVER": TEST_PROBE_RESOLVER,
    }


@pytest.fixture
async def alice(hydra: HydraIssuer) -> dict[str, str]:
    """alice's headers: her access token for this service, signed in through Hydra, without permissions."""
    return bearer(await hydra.user_token("alice", [], [AUDIENCE]))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROCESS), *args],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_start_up_is_refused_without_a_valid_aes_key(env: dict[str, str], tmp_path: Path) -> None:
    assert _run(env, "check-config").returncode == 0
    missing = {k: v for k, v in env.items() if k != "SIGNAL_SECRETS_AES_KEY_FILE"}
    result = _run(missing, "serve")  # no key at all: there is no default key
    assert result.returncode == 2 and "SIGNAL_SECRETS_KEY_FILES: no_key" in result.stderr
    short_key = secrets.token_hex(16)
    result = _run(
        {**env, "SIGNAL_SECRETS_AES_KEY_FILE": str(private_file(tmp_path / "short.key", short_key))}, "serve"
    )
    assert result.returncode == 2 and "SIGNAL_SECRETS_AES_KEY_FILE" in result.stderr
    assert short_key not in result.stderr + result.stdout


@contextlib.contextmanager
def _serving(env: dict[str, str]) -> Iterator[tuple[str, list[str]]]:
    """Migrate, start `serve`, wait until ready; yields (base URL, log lines). SIGTERM on exit must stop it
    with exit code 0; the JSON log lines (stdout) are filled in then."""
    migrated = _run(env, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert "service/0001_signal" in json.loads(migrated.stdout)["applied"]
    process = subprocess.Popen(
        [sys.executable, str(PROCESS), "serve"],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{env['SIGNAL_HTTP_PORT']}"
    try:
        for _ in range(100):
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        logs: list[str] = []
        yield base, logs
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=30)
    logs.extend(stdout.decode().splitlines())
    assert process.returncode == 0, stderr.decode()[-2000:]


def _watcher(url: str) -> dict[str, str]:
    return {"name": "n", "agent_id": "a", "url": url, "prompt_template": "{diff}"}


def test_serves_the_api_with_verified_identity_and_stops_on_sigterm(
    env: dict[str, str], alice: dict[str, str]
) -> None:
    with _serving(env) as (base, _):
        assert httpx.get(f"{base}/v1/signal-watchers").status_code == 401
        for url in ("http://10.0.0.1/", "http://127.0.0.1:9/"):  # the default guard refuses loopback too
            created = httpx.post(f"{base}/v1/signal-watchers", json=_watcher(url), headers=alice)
            assert (created.status_code, problem_code(created)) == (403, "ssrf_blocked_address")
        listed = httpx.get(f"{base}/v1/signal-watchers", headers=alice)
        assert listed.status_code == 200 and listed.json()["items"] == []


async def test_a_token_for_another_service_is_401_and_one_without_signal_read_is_403(
    env: dict[str, str], hydra: HydraIssuer, alice: dict[str, str]
) -> None:
    """Hydra's own tokens through the real routes: alice's token for media-worker is refused even where it
    grants `signal:read`; hers for this service without it is 403 on the admin list; an admin's is served."""
    foreign = bearer(await hydra.user_token("alice", ["signal:read"], ["media-worker"]))
    admin = bearer(await hydra.user_token("admin", ["signal:read"], [AUDIENCE]))
    with _serving({**env, "SIGNAL_SCHEDULER_ENABLED": "false"}) as (base, _):
        async with httpx.AsyncClient(base_url=base) as api:
            own = await api.get("/v1/signal-watchers", headers=foreign)
            every = await api.get("/v1/admin/signal-watchers", headers=foreign)
            lacking = await api.get("/v1/admin/signal-watchers", headers=alice)
            allowed = await api.get("/v1/admin/signal-watchers", headers=admin)
    for refused in (own, every):
        assert (refused.status_code, problem_code(refused)) == (401, "unauthorized")
    assert (lacking.status_code, problem_code(lacking)) == (403, "forbidden")
    assert allowed.status_code == 200 and allowed.json()["items"] == [], allowed.text


@pytest.mark.parametrize("issuer", [None, "http://issuer.example.com", "https://user:pw@issuer.example.com"])
def test_start_up_is_refused_without_a_usable_issuer(env: dict[str, str], issuer: str | None) -> None:
    """No issuer, or one whose keys would come over plain HTTP off loopback or carry credentials: exit 2,
    naming the setting and never its value."""
    changed = {k: v for k, v in env.items() if k != "SIGNAL_AUTH_ISSUER"}
    if issuer is not None:
        changed["SIGNAL_AUTH_ISSUER"] = issuer
    result = _run(changed, "check-config")
    assert result.returncode == 2 and "SIGNAL_AUTH_ISSUER" in result.stderr, result.stderr
    assert issuer is None or issuer not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("setting", "networks"),
    [
        ("SIGNAL_PROBE_ALLOWED_NETWORKS", "127.0.0.1/8"),
        ("SIGNAL_PROBE_ALLOWED_NETWORKS", "127.0.0.0/8,"),
        ("SIGNAL_PROBE_ALLOWED_NETWORKS", "loopback"),
        ("SIGNAL_PROBE_ONLY_NETWORKS", "127.0.0.1/8"),
        ("SIGNAL_PROBE_ONLY_NETWORKS", "10.9.8.0/33,loopback"),
        ("SIGNAL_PROBE_RESOLVER", "dns"),
    ],
)
def test_start_up_is_refused_with_bad_networks(env: dict[str, str], setting: str, networks: str) -> None:
    result = _run({**env, setting: networks}, "check-config")
    assert result.returncode == 2 and setting in result.stderr
    assert networks not in result.stderr.replace(setting, "")


async def test_an_allow_listed_network_lets_the_real_process_probe_a_local_target(
    env: dict[str, str], alice: dict[str, str], fixture_server: FixtureServer
) -> None:
    fixture_server.state["text"] = "local"
    allowing = {**env, "SIGNAL_PROBE_ALLOWED_NETWORKS": "127.0.0.0/8", "SIGNAL_SCHEDULER_ENABLED": "false"}
    with _serving(allowing) as (base, logs):
        async with httpx.AsyncClient(base_url=base, headers=alice) as api:
            created = await api.post(
                "/v1/signal-watchers", json=_watcher(fixture_server.url("127.0.0.1", "/text"))
            )
            assert created.status_code == 201, created.text
            tested = await api.post(f"/v1/signal-watchers/{created.json()['id']}/test")
            refused = await api.post("/v1/signal-watchers", json=_watcher("http://10.0.0.1/"))
            public = await api.post("/v1/signal-watchers", json=_watcher("http://93.184.216.34/"))
    assert (tested.json()["ok"], tested.json()["sample"]) == (True, "local")
    assert (refused.status_code, problem_code(refused)) == (403, "ssrf_blocked_address")
    assert (public.status_code, problem_code(public)) == (403, "probe_network_confined")
    assert fixture_server.requests["/text"] == 1
    logged = [json.loads(line) for line in logs if line.startswith("{")]
    assert any(
        r.get("level") == "WARNING" and r.get("extra", {}).get("allowed_networks") == ["127.0.0.0/8"]
        for r in logged
    ), logged[:5]
    assert any(
        r.get("level") == "INFO" and r.get("extra", {}).get("only_networks") == ["127.0.0.0/8", "::1/128"]
        for r in logged
    ), logged[:5]


async def test_with_the_hosts_file_resolver_a_listed_name_is_probed_and_another_fails_dns(
    env: dict[str, str], alice: dict[str, str], fixture_server: FixtureServer, tmp_path: Path
) -> None:
    """The real process of a test environment resolves probe names from a hosts file alone: a listed name
    reaches the local target; a made-up name is no DNS query, just the probe failure `dns`."""
    fixture_server.state["text"] = "by name"
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 target.yovision-test\n", encoding="utf-8")
    allowing = {
        **env,
        "SIGNAL_PROBE_ALLOWED_NETWORKS": "127.0.0.0/8",
        "SIGNAL_SCHEDULER_ENABLED": "false",
        "SIGNAL_PROBE_HOSTS_FILE": str(hosts),
    }
    with _serving(allowing) as (base, logs):
        async with httpx.AsyncClient(base_url=base, headers=alice) as api:
            named = await api.post(
                "/v1/signal-watchers:test", json=_watcher(fixture_server.url("target.yovision-test", "/text"))
            )
            made_up = await api.post(
                "/v1/signal-watchers:test", json=_watcher("http://no-such-host.yovision-test.invalid/")
            )
    assert named.status_code == 200, named.text
    assert (named.json()["ok"], named.json()["sample"]) == (True, "by name")
    assert (made_up.status_code, made_up.json()["ok"], made_up.json()["error_code"]) == (200, False, "dns")
    logged = [json.loads(line) for line in logs if line.startswith("{")]
    assert any("hosts file only" in r.get("msg", "") for r in logged), logged[:5]
