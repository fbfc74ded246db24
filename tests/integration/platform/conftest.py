from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.support.postgres import TEST_SERVICE_MIGRATIONS, migrated_schema_fixture, runtime_pool_fixture
from tests.support.stack import (
    REPO_ROOT,
    Stack,
    create_topic,
    delete_topic,
    drop_schema_and_roles,
    migrate_test_schema,
    unique_name,
)
from yovision_platform.storage import Identifier, SchemaPlan

FIXTURE_MIGRATIONS = TEST_SERVICE_MIGRATIONS


def plan_for(schema: Identifier) -> SchemaPlan:
    return SchemaPlan.for_service(schema, FIXTURE_MIGRATIONS)


migrated = migrated_schema_fixture(FIXTURE_MIGRATIONS, name="migrated")
runtime_pool = runtime_pool_fixture("migrated", name="runtime_pool", max_size=6)


HELD_TRANSACTION_PROBE = Path(__file__).with_name("held_transaction_probe.py")
HOLD_SECONDS = float(os.environ.get("YOVISION_TEST_HOLD_SECONDS", "60"))


@dataclass
class HeldTransactionProbe:
    """The 60 s held-transaction scenario, running in its own process from the first platform test on."""

    process: subprocess.Popen[bytes]
    result_file: Path
    hold_seconds: float

    async def result(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.hold_seconds + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            await asyncio.sleep(0.5)
        assert self.process.poll() == 0, "the held-transaction probe failed"
        document: dict[str, Any] = json.loads(self.result_file.read_text())
        return document


@pytest.fixture(scope="session", autouse=True)
async def held_transaction_probe(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[HeldTransactionProbe]:
    """Started with the first platform test, so the hold overlaps the other tests instead of adding 60 s."""
    name = Identifier(unique_name("t"))
    topic = f"test.{uuid.uuid4().hex[:10]}.v1"
    admin = await asyncpg.connect(stack.admin_dsn)
    try:
        migrated = await migrate_test_schema(stack, admin, name, FIXTURE_MIGRATIONS)
        await create_topic(stack.kafka_bootstrap, topic, partitions=3)
        result_file = tmp_path_factory.mktemp("held") / "result.json"
        env = {
            **os.environ,
            "TEST_RUNTIME_DSN": migrated.runtime_dsn,
            "TEST_SCHEMA": name,
            "TEST_BOOTSTRAP": stack.kafka_bootstrap,
            "TEST_TOPIC": topic,
            "TEST_HOLD_SECONDS": str(HOLD_SECONDS),
        }
        process = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, not awaited here
            [sys.executable, str(HELD_TRANSACTION_PROBE), str(result_file)], env=env, cwd=REPO_ROOT
        )
        try:
            yield HeldTransactionProbe(process, result_file, HOLD_SECONDS)
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
            await delete_topic(stack.kafka_bootstrap, topic)
    finally:
        await drop_schema_and_roles(admin, name)
        await admin.close()
