"""Bell as a real server process: start-up refusals, health, the signed push end to end, a SIGKILL restart
that keeps replay answers byte-for-byte, clean SIGTERM, and no secret in any log line or response."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO_ROOT, Stack, free_port, private_file, runtime_dsn_for
from tests.integration.bell_receiver.conftest import JWT_ISSUER, KEY_ID, Keys
from tests.integration.bell_receiver.relay_client import RelayClient, batch_body, fact
from tests.integration.platform.kafka_helpers import wait_until
from yovision_platform.db import Identifier

LAUNCHER = Path(__file__).with_name("bell_process.py")


START_TIMEOUT_SECONDS = 90


class BellProcess:
    def __init__(self, stack: Stack, schema: Identifier, keys: Keys, tmp_path: Path, topic: str) -> None:
        self.password = uuid.uuid4().hex
        self.port = free_port()
        self.log_path = tmp_path / "bell.log"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("BELL_")},
            "YOVISION_TEST_BELL_SCHEMA": schema,
            "YOVISION_TEST_BELL_TOPICS": topic,
            "YOVISION_TEST_BELL_GROUP": f"bell-test-{uuid.uuid4().hex[:8]}",
            "BELL_HTTP_PORT": str(self.port),
            "BELL_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
            "BELL_DATABASE_DSN_FILE": str(
                private_file(
                    tmp_path / "runtime.dsn", runtime_dsn_for(stack.admin_dsn, f"{schema}_app", self.password)
                )
            ),
            "BELL_MIGRATION_DSN_FILE": str(private_file(tmp_path / "admin.dsn", stack.admin_dsn)),
            "BELL_RELAY_KEY_FILES": json.dumps({KEY_ID: str(keys.relay_file)}),
            "BELL_AUTH_JWT_KEY_FILE": str(keys.jwt_file),
            "BELL_AUTH_JWT_ISSUER": JWT_ISSUER,
        }
        self.instance_id = f"bell-test-{uuid.uuid4().hex[:8]}"
        self.env["BELL_INSTANCE_ID"] = self.instance_id
        self.process: subprocess.Popen[bytes] | None = None

    def run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(LAUNCHER), *args],
            env=env or self.env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def start(self) -> None:
        with self.log_path.open("a") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, str(LAUNCHER), "serve"],
                env=self.env,
                cwd=REPO_ROOT,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )

    def stop(self, signum: int) -> int:
        assert self.process is not None
        self.process.send_signal(signum)
        return self.process.wait(timeout=30)


@pytest.fixture
def bell(
    stack: Stack, schema_name: Identifier, keys: Keys, tmp_path: Path, topic: str
) -> Iterator[BellProcess]:
    process = BellProcess(stack, schema_name, keys, tmp_path, topic)
    yield process
    if process.process is not None and process.process.poll() is None:
        process.process.kill()
        process.process.wait(timeout=10)


@pytest.mark.parametrize(
    "missing", ["BELL_DATABASE_DSN_FILE", "BELL_RELAY_KEY_FILES", "BELL_AUTH_JWT_KEY_FILE"]
)
def test_refuses_to_start_without_dsn_or_keys(bell: BellProcess, missing: str) -> None:
    env = {k: v for k, v in bell.env.items() if k != missing}
    result = bell.run("serve", env=env)
    assert result.returncode == 2
    assert missing in result.stderr


async def wait_healthy(client: httpx.AsyncClient, bell: BellProcess | None = None) -> None:
    """Until /healthz answers; with ``bell``, until *this* Bell answers (its instance id), not another
    process that took the free port, and failing at once with its log when it exited."""

    async def healthy() -> bool:
        if bell is not None:
            alive = bell.process is not None and bell.process.poll() is None
            assert alive, bell.log_path.read_text()[-2000:]
        try:
            response = await client.get("/healthz")
        except httpx.TransportError:
            return False
        return response.status_code == 200 and (
            bell is None or response.json()["instance_id"] == bell.instance_id
        )

    # A bounded wait, generous: a service process starting while `make test` keeps both cores busy can
    # take several times its idle start-up (about 2 s of CPU for its imports alone).
    await wait_until(healthy, timeout_seconds=START_TIMEOUT_SECONDS)


async def test_the_signed_push_end_to_end_across_a_sigkill_restart(bell: BellProcess, keys: Keys) -> None:
    migrated = bell.run("migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert json.loads(migrated.stdout)["applied"][-1] == "service/0003_notification_reads"
    bell.start()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{bell.port}", timeout=10) as http:
        await wait_healthy(http, bell)

        async def ready() -> bool:
            return (await http.get("/readyz")).status_code == 200

        await wait_until(ready, timeout_seconds=30)
        checks = (await http.get("/readyz")).json()["checks"]
        assert {"database", "worker:audit-ingest", "worker:receipt-purge"} <= set(checks)

        relay = RelayClient(http, keys.signing_ring)
        body = batch_body([fact(), fact(2), {**fact(), "token": "s3cr3t-field-value"}])
        headers = relay.sign(body)
        first = await relay.post_raw(body, headers=headers)
        assert first.status_code == 200
        assert [r["status"] for r in first.json()["results"]] == ["accepted", "accepted", "rejected"]

        assert bell.stop(signal.SIGKILL) == -signal.SIGKILL
        bell.start()
        await wait_healthy(http, bell)
        again = await relay.post_raw(body, headers=headers)
        assert again.status_code == 200 and again.content == first.content
        conflict = await relay.post_items([fact()], nonce=headers["X-Yovision-Nonce"])
        assert conflict.status_code == 409
        refused = await relay.post_raw(body, headers={**headers, "X-Yovision-Signature": "v1=" + "0" * 64})
        assert refused.status_code == 401

        metrics = (await http.get("/metrics")).text
        assert 'bell_relay_requests_total{outcome="replayed"} 1.0' in metrics
        assert 'bell_relay_signature_rejections_total{reason="signature_mismatch"} 1.0' in metrics
        responses = first.text + again.text + conflict.text + refused.text + metrics
    assert bell.stop(signal.SIGTERM) == 0
    log_text = bell.log_path.read_text()
    for secret in (keys.relay_hex, keys.jwt_hex, bell.password, headers["X-Yovision-Signature"][3:]):
        assert secret not in log_text and secret not in responses
    assert "s3cr3t-field-value" not in log_text + responses
    assert '"msg":"relay batch handled"' in log_text
