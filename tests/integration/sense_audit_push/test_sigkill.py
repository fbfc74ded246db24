"""The audit pusher killed with SIGKILL mid-batch (Bell has stored the batch, the pusher has not recorded
it), and Bell killed and restarted too: after a restart every fact is in Bell exactly once, none
dead-lettered."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import asyncpg
import pytest

from tests.integration.sense_audit_push.fake_bell import FakeBell, forward
from tests.support.bell_process import BellProcess
from tests.support.bell_receiver_fixtures import KEY_ID, Keys
from tests.support.kafka import wait_until
from tests.support.sense_audit_push_fixtures import Outbox, bell_event_counts, restart_bell
from tests.support.stack import REPO_ROOT, MigratedSchema, private_file
from yovision_platform.storage import Identifier

LAUNCHER = Path(__file__).with_name("push_process.py")
HANG_SECONDS = 3600.0


class PushProcess:
    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("a") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, str(LAUNCHER)], env=self.env, cwd=REPO_ROOT, stdout=log_file, stderr=log_file
            )

    def stop(self, signum: int) -> int:
        assert self.process is not None
        self.process.send_signal(signum)
        return self.process.wait(timeout=30)


@pytest.fixture
def push_env(sense_schema: MigratedSchema, keys: Keys, tmp_path: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("SENSE_")},
        "SENSE_AUDIT_PUSH_ENABLED": "true",
        "SENSE_BELL_KEY_FILE": str(keys.relay_file),
        "SENSE_BELL_KEY_ID": KEY_ID,
        "YOVISION_TEST_SENSE_SCHEMA": sense_schema.name,
        "YOVISION_TEST_SENSE_DSN_FILE": str(private_file(tmp_path / "sense.dsn", sense_schema.runtime_dsn)),
        "YOVISION_TEST_LEASE_SECONDS": "4",
        "YOVISION_TEST_DEADLINE_SECONDS": "3",
        # One request at a time: the proxy below holds the second request, and the assertions count on
        # which facts Bell stored before the kill.
        "YOVISION_TEST_PIPELINE_DEPTH": "1",
    }


async def test_every_fact_reaches_bell_exactly_once_across_pusher_and_bell_sigkills(
    bell_url: str,
    bell: BellProcess,
    keys: Keys,
    outbox: Outbox,
    push_env: dict[str, str],
    admin_conn: asyncpg.Connection,
    schema_name: Identifier,
    sense_schema: MigratedSchema,
    tmp_path: Path,
) -> None:
    event_ids = await outbox.add(250)
    hung_batch: list[str] = []
    second_forwarded = asyncio.Event()
    statuses: dict[str, list[str]] = {}
    signatures: list[str] = []

    async def hang_after_the_second_is_stored(
        number: int, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        signatures.append(headers["x-yovision-signature"])
        status, answer = await forward(bell_url, body, headers)
        if status == 200:
            for result in json.loads(answer)["results"]:
                statuses.setdefault(result["event_id"], []).append(result["status"])
        if number == 2:
            hung_batch.extend(item["event_id"] for item in json.loads(body)["items"])
            second_forwarded.set()
            await asyncio.sleep(HANG_SECONDS)
        return status, answer

    proxy = FakeBell(hang_after_the_second_is_stored)
    await proxy.start()
    pusher = PushProcess({**push_env, "SENSE_BELL_URL": proxy.url}, tmp_path / "push.log")
    try:
        pusher.start()
        await asyncio.wait_for(second_forwarded.wait(), timeout=30)
        assert pusher.stop(signal.SIGKILL) == -signal.SIGKILL
        assert await outbox.undelivered() == 150, "the cursor stands after the first batch"
        assert len(hung_batch) == 100

        await restart_bell(bell, signal.SIGKILL)
        pusher.start()

        async def all_delivered() -> bool:
            return await outbox.undelivered() == 0

        await wait_until(all_delivered, timeout_seconds=60, interval=0.2)
        assert pusher.stop(signal.SIGTERM) == 0
    finally:
        if pusher.process is not None and pusher.process.poll() is None:
            pusher.process.kill()
            pusher.process.wait(timeout=10)
        await proxy.stop()

    assert await bell_event_counts(admin_conn, schema_name) == dict.fromkeys(event_ids, 1)
    assert await outbox.dead_letters() == {}
    assert Counter(tuple(s) for s in statuses.values()) == Counter(
        {("accepted",): 150, ("accepted", "duplicate"): 100}
    )
    assert {event_id for event_id, s in statuses.items() if len(s) == 2} == set(hung_batch)
    log_text = (tmp_path / "push.log").read_text()
    assert keys.relay_hex not in log_text and sense_schema.runtime_password not in log_text
    assert len(signatures) >= 4 and not any(signature[3:] in log_text for signature in signatures)
    assert not any(str(event_id) in log_text for event_id in event_ids)
