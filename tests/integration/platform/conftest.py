from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import MigratedSchema, Stack, migrate_test_schema
from yovision_platform.db import Identifier
from yovision_platform.migrations import SchemaPlan

FIXTURE_MIGRATIONS = Path(__file__).parent / "fixture_migrations"


def plan_for(schema: Identifier) -> SchemaPlan:
    return SchemaPlan.for_service(schema, FIXTURE_MIGRATIONS)


@pytest.fixture
async def migrated(stack: Stack, admin_conn: asyncpg.Connection, schema_name: Identifier) -> MigratedSchema:
    return await migrate_test_schema(stack, admin_conn, schema_name, FIXTURE_MIGRATIONS)


@pytest.fixture
async def runtime_pool(migrated: MigratedSchema) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(migrated.runtime_dsn, min_size=1, max_size=6)
    assert pool is not None
    yield pool
    await pool.close()
