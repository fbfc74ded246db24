from __future__ import annotations

import ipaddress
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import asyncpg
import pytest

import signal_watcher
from signal_watcher.adapters.crypto import SecretCipher
from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.repository import WatcherRepository
from signal_watcher.domain.checking import CheckDecision
from signal_watcher.domain.model import CompareMode, Method, WatcherSpec
from signal_watcher.domain.ssrf import AddressGuard, IpAddress
from signal_watcher.service_layer.checks import CheckRunner
from tests.conftest import MigratedSchema, Stack, migrate_test_schema
from tests.integration.signal_watcher.fixture_server import FixtureServer
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.db import Identifier
from yovision_platform.encryption import EncryptionKeyRing

FIXTURE_HOST = "fixture.example.com"
LOOPBACK_NETWORK = ipaddress.ip_network("127.0.0.0/8")
LOOPBACK_FOR_TESTS = AddressGuard.allowing([LOOPBACK_NETWORK])  # as SIGNAL_PROBE_ALLOWED_NETWORKS=127.0.0.0/8


def fake_resolver(table: Mapping[str, Sequence[str]]):  # type: ignore[no-untyped-def]
    """A resolver port that answers from `table` (name -> addresses) and fails for other names."""

    async def resolve(host: str, port: int) -> list[IpAddress]:
        if host not in table:
            raise OSError("no such name")
        return [ipaddress.ip_address(a) for a in table[host]]

    return resolve


@pytest.fixture
async def fixture_server() -> AsyncIterator[FixtureServer]:
    server = await FixtureServer().start()
    yield server
    await server.stop()


@pytest.fixture
async def local_probe() -> AsyncIterator[ProbeClient]:
    """A probe client that may reach 127.0.0.1 fixture servers via the name FIXTURE_HOST (tests only)."""
    client = ProbeClient(resolver=fake_resolver({FIXTURE_HOST: ["127.0.0.1"]}), guard=LOOPBACK_FOR_TESTS)
    yield client
    await client.aclose()


SIGNAL_MIGRATIONS = Path(signal_watcher.__file__).resolve().parent / "migrations"


@pytest.fixture
async def signal_db(stack: Stack, admin_conn: asyncpg.Connection, schema_name: Identifier) -> MigratedSchema:
    return await migrate_test_schema(stack, admin_conn, schema_name, SIGNAL_MIGRATIONS)


@pytest.fixture
async def pool(signal_db: MigratedSchema) -> AsyncIterator[asyncpg.Pool]:
    created = await asyncpg.create_pool(signal_db.runtime_dsn, min_size=1, max_size=8)
    assert created is not None
    yield created
    await created.close()


def cipher_for(key: bytes, key_id: str = "k1") -> SecretCipher:
    return SecretCipher(EncryptionKeyRing({key_id: key}, key_id, accept_legacy=True))


@pytest.fixture
def cipher() -> SecretCipher:
    return cipher_for(os.urandom(32))


@pytest.fixture
def repo(signal_db: MigratedSchema, cipher: SecretCipher) -> WatcherRepository:
    return WatcherRepository(signal_db.name, cipher)


@pytest.fixture(scope="session")
def serde() -> AvroSerde:
    return AvroSerde(SchemaRegistry.load())


@pytest.fixture
def runner(
    pool: asyncpg.Pool, repo: WatcherRepository, local_probe: ProbeClient, serde: AvroSerde
) -> CheckRunner:
    return CheckRunner(pool, repo, local_probe, serde)


def make_spec(url: str, **changes: Any) -> WatcherSpec:
    spec = WatcherSpec(
        name="watch",
        agent_id="agent-1",
        url=url,
        method=Method.GET,
        headers=(),
        body=None,
        interval_minutes=10,
        compare_mode=CompareMode.HASH,
        json_path=None,
        prompt_template="{name} changed: {diff}",
    )
    return replace(spec, **changes).validated()


async def make_due(pool: asyncpg.Pool, schema: Identifier, watcher_id: uuid.UUID | None = None) -> None:
    async with pool.acquire() as conn:
        await conn.execute(
            f"UPDATE {schema.quoted}.watchers SET next_check_at = now() WHERE ($1::uuid IS NULL OR id = $1)",
            watcher_id,
        )


async def check_now(
    pool: asyncpg.Pool, repo: WatcherRepository, runner: CheckRunner, watcher_id: uuid.UUID
) -> CheckDecision | None:
    """Make the watcher due, claim it as the scheduler would, and run one check."""
    await make_due(pool, repo.schema, watcher_id)
    async with pool.acquire() as conn:
        all_claimed = await repo.claim_due(conn, "test", limit=1000, lease_seconds=60)
        for other in all_claimed:
            if other.row_id != watcher_id:
                await repo.leases.release(conn, other.row_id, other.lease)
    claimed = [c for c in all_claimed if c.row_id == watcher_id]
    assert len(claimed) == 1
    return await runner.run(watcher_id, claimed[0].lease)


async def outbox_events(
    pool: asyncpg.Pool, schema: Identifier, serde: AvroSerde
) -> list[tuple[str, str, dict[str, Any]]]:
    """(topic, event_type, decoded record) of every outbox row, oldest first."""
    async with pool.acquire() as conn:
        rows = await conn.fetch(f"SELECT topic, event_type, value FROM {schema.quoted}.outbox ORDER BY id")
    return [(r["topic"], r["event_type"], dict(serde.decode(r["value"]).record)) for r in rows]
