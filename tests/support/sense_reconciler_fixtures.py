from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from sense_reconciler.adapters.unit_of_work import postgres_units
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.source_uris import SourceUris
from tests.support.stack import MigratedSchema, Stack, migrate_test_schema
from tests.unit.sense_reconciler.conftest import DEVICE_TOPIC_PARTITIONS as DEVICE_TOPIC_PARTITIONS
from tests.unit.sense_reconciler.conftest import devices_with
from yovision_platform.mediamtx import SINGLE_MEDIA_SERVER_ID
from yovision_platform.messaging import AvroSerde, SchemaRegistry
from yovision_platform.security import EncryptionKeyRing
from yovision_platform.storage import Identifier, SchemaPlan

MIGRATIONS = Path(__file__).resolve().parents[2] / "services/sense-reconciler/src/sense_reconciler/migrations"


def sense_plan(schema: Identifier, migrations: Path = MIGRATIONS) -> SchemaPlan:
    return SchemaPlan.for_service(schema, migrations)


@pytest.fixture
async def sense_schema(
    stack: Stack, admin_conn: asyncpg.Connection, schema_name: Identifier
) -> MigratedSchema:
    return await migrate_test_schema(stack, admin_conn, schema_name, MIGRATIONS)


@pytest.fixture
async def sense_pool(sense_schema: MigratedSchema) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(sense_schema.runtime_dsn, min_size=1, max_size=8)
    assert pool is not None
    yield pool
    await pool.close()


@pytest.fixture(scope="session")
def serde() -> AvroSerde:
    return AvroSerde(SchemaRegistry.load())


@pytest.fixture
def sources() -> SourceUris:
    """Source URIs under a fresh key ring (one key, "k1")."""
    return SourceUris(EncryptionKeyRing({"k1": os.urandom(32)}, "k1"))


def devices_on(
    pool: asyncpg.Pool,
    schema: MigratedSchema,
    serde: AvroSerde,
    sources: SourceUris,
    *,
    media_servers: frozenset[str] = frozenset({SINGLE_MEDIA_SERVER_ID}),
    default_media_server: str = SINGLE_MEDIA_SERVER_ID,
) -> Devices:
    """The device commands on `schema`."""
    units = postgres_units(pool, schema.name)
    return devices_with(
        units, serde, sources, media_servers=media_servers, default_media_server=default_media_server
    )


@pytest.fixture
def devices(
    sense_pool: asyncpg.Pool, sense_schema: MigratedSchema, serde: AvroSerde, sources: SourceUris
) -> Devices:
    return devices_on(sense_pool, sense_schema, serde, sources)
