"""Fixtures for the Sense → Bell audit push: a migrated unique Sense schema with devices, key files, the real
Bell as its own process (tests/integration/bell_receiver/bell_process.py), and audit push configs."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import asyncpg
import httpx
import pytest

import sense_reconciler
from sense_reconciler.adapters.audit_push_store import PostgresAuditPushStore
from sense_reconciler.domain.audit_facts import OutboxFact
from sense_reconciler.domain.audit_push import AuditPushConfig
from sense_reconciler.domain.audit_push_outcome import BatchFailure, ItemResults
from sense_reconciler.service_layer.audit_pusher import AuditPusher, RoundResult
from sense_reconciler.service_layer.ports import BellPort
from sense_reconciler.settings import load_audit_push_config
from tests.support.bell_process import BellProcess, bell, wait_healthy
from tests.support.bell_receiver_fixtures import KEY_ID, Keys, keys
from tests.support.kafka import wait_until
from tests.support.postgres import migrated_schema_fixture, runtime_pool_fixture
from tests.support.stack import (
    MigratedSchema,
)
from yovision_platform.storage import Identifier

__all__ = ["bell", "keys"]  # the bell-receiver tests' fixtures, used here too

SENSE_MIGRATIONS = Path(sense_reconciler.__file__).resolve().parent / "migrations"
# A request to the real Bell may take seconds on a loaded machine (`make test` runs several workers on two
# cores): a deadline it misses is a retry, a duplicate send the tests count. Tests of the deadline itself
# set a short one of their own.
TEST_LEASE_SECONDS = 15.0
CLAIM_WITHIN_SECONDS = 30.0
TEST_DEADLINE_SECONDS = 10.0


# its own name: the Bell fixtures of these tests take `schema_name`
sense_schema = migrated_schema_fixture(SENSE_MIGRATIONS, name="sense_schema", own_name=True)
sense_pool = runtime_pool_fixture("sense_schema", name="sense_pool", max_size=6)


class Outbox:
    """Writes devices and facts as Sense does (runtime role) and reads the outbox back."""

    def __init__(self, pool: asyncpg.Pool, schema: Identifier) -> None:
        self.pool = pool
        self.table = f"{schema.quoted}.device_operation_outbox"
        self.schema = schema
        self.device_id: uuid.UUID | None = None

    async def device(self) -> uuid.UUID:
        if self.device_id is None:
            self.device_id = uuid.uuid4()
            async with self.pool.acquire() as conn:
                sites = f"{self.schema.quoted}.sites"
                await conn.execute(f"INSERT INTO {sites} (tenant_id, site_id) VALUES ('tenant-a', 'site-1')")
                await conn.execute(
                    f"""INSERT INTO {self.schema.quoted}.devices
                        (id, tenant_id, site_id, name, path_name, source_uri, desired_state)
                        VALUES ($1, 'tenant-a', 'site-1', 'cam', $2, 'rtsp://u:pw@cam/1', 'enabled')""",
                    self.device_id,
                    f"cam-{self.device_id.hex[:8]}",
                )
        return self.device_id

    async def add(self, count: int, *, version: int = 1, tenant_id: str = "tenant-a") -> list[uuid.UUID]:
        device_id = await self.device()
        event_ids = [uuid.uuid4() for _ in range(count)]
        async with self.pool.acquire() as conn:
            await conn.executemany(
                f"""INSERT INTO {self.table} (event_id, fact_version, action, actor, device_id, tenant_id,
                        site_id, changed_fields, config_version)
                    VALUES ($1, $2, 'device.config_changed', 'operator:alice', $3, $4, 'site-1',
                            ARRAY['name', 'source_uri'], 2)""",
                [(event_id, version, device_id, tenant_id) for event_id in event_ids],
            )
        return event_ids

    async def rows(self) -> list[asyncpg.Record]:
        async with self.pool.acquire() as conn:
            return await conn.fetch(f"SELECT *, now() AS db_now FROM {self.table} ORDER BY id")

    async def cursor(self) -> asyncpg.Record:
        """The push's cursor row, with the database's now()."""
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(
                f"""SELECT *, now() AS db_now FROM {self.schema.quoted}.outbox_cursors
                     WHERE outbox = 'device_operation_outbox' AND shard = 0"""
            )
        assert row is not None
        return row

    async def wait_leases_expired(self) -> None:
        async def expired() -> bool:
            row = await self.cursor()
            return row["lease_expires_at"] is None or row["lease_expires_at"] <= row["db_now"]

        await wait_until(expired, timeout_seconds=30, interval=0.05)

    async def undelivered(self) -> int:
        """Facts the cursor has not passed yet."""
        return await PostgresAuditPushStore(self.pool, self.schema, "reader", lease_seconds=1).pending()

    async def dead_letters(self) -> dict[uuid.UUID, str]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                f"SELECT event_id, error_code FROM {self.schema.quoted}.device_operation_dead_letters"
            )
        return {r["event_id"]: r["error_code"] for r in rows}


@pytest.fixture
async def outbox(sense_pool: asyncpg.Pool, sense_schema: MigratedSchema) -> Outbox:
    return Outbox(sense_pool, sense_schema.name)


class CurrentBell:
    """A `BellPort` sending through whichever client is current (one pusher, several clients)."""

    client: BellPort

    async def send(self, facts: Sequence[OutboxFact]) -> ItemResults | BatchFailure:
        return await self.client.send(facts)


def pusher(
    pool: asyncpg.Pool, schema: Identifier, config: AuditPushConfig, bell: BellPort, *, owner: str
) -> AuditPusher:
    """The audit pusher of `owner` on PostgreSQL, pushing through `bell`."""
    store = PostgresAuditPushStore(pool, schema, owner, lease_seconds=config.lease_seconds)
    return AuditPusher(store, bell, config)


def push_config(url: str, keys: Keys, **overrides: float) -> AuditPushConfig:
    config = load_audit_push_config(enabled=True, bell_url=url, key_file=keys.relay_file, key_id=KEY_ID)
    assert config is not None
    values: dict[str, float] = {
        "lease_seconds": TEST_LEASE_SECONDS,
        "request_deadline_seconds": TEST_DEADLINE_SECONDS,
        "poll_interval_seconds": 0.05,
    } | overrides
    return dataclasses.replace(config, **values)  # type: ignore[arg-type]


@pytest.fixture
async def bell_url(bell: BellProcess) -> str:
    """Bell migrated, started and healthy; its base URL."""
    migrated = bell.run("migrate")
    assert migrated.returncode == 0, migrated.stderr
    bell.start()
    url = f"http://127.0.0.1:{bell.port}"
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        await wait_healthy(http, bell)
    return url


async def bell_event_counts(admin: asyncpg.Connection, schema: Identifier) -> dict[uuid.UUID, int]:
    rows = await admin.fetch(
        f"SELECT event_id, count(*) AS n FROM {schema.quoted}.audit_events "
        "WHERE source_system = 'sense' GROUP BY event_id"
    )
    return {row["event_id"]: row["n"] for row in rows}


async def restart_bell(bell: BellProcess, signum: int) -> None:
    bell.stop(signum)
    bell.start()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{bell.port}", timeout=5) as http:
        await wait_healthy(http, bell)


async def claiming_round(worker: AuditPusher) -> RoundResult:
    """The worker's first round that claims facts. A round may claim none although facts were written:
    the cursor reads only below the snapshot horizon of the whole database, which the other tests'
    transactions (pytest-xdist workers share the database) can hold back for a moment."""
    deadline = time.monotonic() + CLAIM_WITHIN_SECONDS
    while (round_ := await worker.run_once()).claimed == 0:
        assert time.monotonic() < deadline, "no fact claimed in time"
        await asyncio.sleep(0.05)
    return round_
