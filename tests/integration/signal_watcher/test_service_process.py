"""signal-watcher as a real process: refuses to start without its keys; serves the API with a JWT."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from signal_watcher.settings import JWT_AUDIENCE
from tests.conftest import Stack, free_port, private_file, problem_code, runtime_dsn_for
from yovision_platform.auth import TokenVerifier
from yovision_platform.db import Identifier

PROCESS = Path(__file__).with_name("service_process.py")
REPO_ROOT = Path(__file__).resolve().parents[3]
ISSUER = "test-issuer"


@pytest.fixture
def env(stack: Stack, schema_name: Identifier, tmp_path: Path) -> dict[str, str]:
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
        "SIGNAL_AUTH_JWT_KEY_FILE": str(private_file(tmp_path / "jwt.key", secrets.token_hex(32) + "\n")),
        "SIGNAL_AUTH_JWT_ISSUER": ISSUER,
    }


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
    result = _run(missing, "serve")
    assert result.returncode == 2 and "SIGNAL_SECRETS_AES_KEY_FILE" in result.stderr
    short_key = secrets.token_hex(16)
    result = _run(
        {**env, "SIGNAL_SECRETS_AES_KEY_FILE": str(private_file(tmp_path / "short.key", short_key))}, "serve"
    )
    assert result.returncode == 2 and "SIGNAL_SECRETS_AES_KEY_FILE" in result.stderr
    assert short_key not in result.stderr + result.stdout


def test_serves_the_api_with_verified_identity_and_stops_on_sigterm(env: dict[str, str]) -> None:
    migrated = _run(env, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert "service/0001_signal" in json.loads(migrated.stdout)["applied"]
    key = bytes.fromhex(Path(env["SIGNAL_AUTH_JWT_KEY_FILE"]).read_text().strip())
    token = TokenVerifier(key, issuer=ISSUER, audience=JWT_AUDIENCE).mint("alice")
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
        assert httpx.get(f"{base}/v1/signal-watchers").status_code == 401
        created = httpx.post(
            f"{base}/v1/signal-watchers",
            json={"name": "n", "agent_id": "a", "url": "http://10.0.0.1/", "prompt_template": "{diff}"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert (created.status_code, problem_code(created)) == (422, "ssrf_blocked_address")
        listed = httpx.get(f"{base}/v1/signal-watchers", headers={"Authorization": f"Bearer {token}"})
        assert listed.status_code == 200 and listed.json()["items"] == []
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr.decode()[-2000:]
