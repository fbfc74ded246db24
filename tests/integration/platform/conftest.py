from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import MigratedSchema, Stack, runtime_dsn_for
from yovision_platform.db import Identifier
from yovision_platform.migrations import SchemaPlan, migrate

FIXTURE_MIGRATIONS = Path(__file__).parent / "fixture_migrations"


def plan_for(schema: Identifier) -> SchemaPlan:
    return SchemaPlan.for_service(schema, FIXTURE_MIGRATIONS)


@pytest.fixture
async def migrated(stack: Stack, admin_conn: asyncpg.Connection, schema_name: Identifier) -> MigratedSchema:
    password = secrets.token_urlsafe(24)
    plan = plan_for(schema_name)
    await migrate(admin_conn, plan, runtime_password=password)
    return MigratedSchema(
        name=schema_name,
        runtime_role=plan.runtime_role,
        runtime_password=password,
        runtime_dsn=runtime_dsn_for(stack.admin_dsn, plan.runtime_role, password),
    )


@pytest.fixture
async def runtime_pool(migrated: MigratedSchema) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(migrated.runtime_dsn, min_size=1, max_size=6)
    assert pool is not None
    yield pool
    await pool.close()
