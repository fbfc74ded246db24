"""Bell as a real process (tests/integration/bell_receiver/bell_process.py) on a test's own schema, keys and
topic: `BellProcess`, the `bell` fixture and `wait_healthy`; the Bell and Sense audit push tests use them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.bell_receiver_fixtures import KEY_ID, Keys
from tests.support.issuers import HydraIssuer
from tests.support.kafka import wait_until
from tests.support.stack import REPO_ROOT, Stack, free_port, private_file, runtime_dsn_for
from yovision_platform.storage import Identifier

LAUNCHER = REPO_ROOT / "tests/integration/bell_receiver/bell_process.py"


START_TIMEOUT_SECONDS = 90


class BellProcess:
    """`issuer`: the OpenID provider whose access tokens the read APIs take (`BELL_AUTH_ISSUER`)."""

    def __init__(
        self, stack: Stack, schema: Identifier, keys: Keys, tmp_path: Path, topic: str, issuer: str
    ) -> None:
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
            "BELL_AUDIT_PUSH_KEY_FILES": json.dumps({KEY_ID: str(keys.relay_file)}),
            "BELL_AUTH_ISSUER": issuer,
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
    stack: Stack, schema_name: Identifier, keys: Keys, tmp_path: Path, topic: str, hydra: HydraIssuer
) -> Iterator[BellProcess]:
    process = BellProcess(stack, schema_name, keys, tmp_path, topic, hydra.issuer)
    yield process
    if process.process is not None and process.process.poll() is None:
        process.process.kill()
        process.process.wait(timeout=10)


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
