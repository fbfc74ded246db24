"""A service's migrated schema and a pool on it, as fixtures: one factory for every tier's conftest.

    sense_schema = migrated_schema_fixture("sense_reconciler", name="sense_schema")
    sense_pool = runtime_pool_fixture("sense_schema", name="sense_pool", max_size=8)

`migrated_schema_fixture` migrates a fresh schema with the platform track and the service's migrations (a
package whose `migrations/` directory holds them, or a directory) with a fresh runtime password. The
schema is the test's `schema_name` (unique, dropped with its roles after the test by that fixture), or,
with `own_name=True`, a unique name of its own dropped by this fixture (for tests whose `schema_name` is
another service's). `runtime_pool_fixture` opens a pool as the runtime role on the schema fixture it names
and closes it after the test. Both are function-scoped, as the fixtures they replace.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.support.stack import (
    REPO_ROOT,
    MigratedSchema,
    Stack,
    drop_schema_and_roles,
    migrate_test_schema,
    unique_name,
)
from yovision_platform.storage import Identifier

# The platform tests' service (tests/integration/platform/demo_service.py): its migrations, which the
# cluster tests migrate too.
TEST_SERVICE_MIGRATIONS = REPO_ROOT / "tests/integration/platform/fixture_migrations"


def migrations_of(service: str | Path) -> Path:
    """The migrations directory of a service package (`"sense_reconciler"`), or `service` if a path."""
    if isinstance(service, Path):
        return service
    module = importlib.import_module(service)
    assert module.__file__ is not None
    return Path(module.__file__).resolve().parent / "migrations"


def migrated_schema_fixture(service: str | Path, *, name: str, own_name: bool = False) -> Any:
    migrations = migrations_of(service)
    if own_name:

        async def own(stack: Stack, admin_conn: asyncpg.Connection) -> AsyncIterator[MigratedSchema]:
            schema = Identifier(unique_name("t"))
            try:
                yield await migrate_test_schema(stack, admin_conn, schema, migrations)
            finally:
                await drop_schema_and_roles(admin_conn, schema)

        return pytest.fixture(name=name)(own)

    async def migrated(
        stack: Stack, admin_conn: asyncpg.Connection, schema_name: Identifier
    ) -> MigratedSchema:
        return await migrate_test_schema(stack, admin_conn, schema_name, migrations)

    return pytest.fixture(name=name)(migrated)


def runtime_pool_fixture(schema: str, *, name: str, max_size: int) -> Any:
    """A pool on the schema fixture named `schema` (its parameter name is set to it for pytest)."""

    async def pool(**fixtures: MigratedSchema) -> AsyncIterator[asyncpg.Pool]:
        created = await asyncpg.create_pool(fixtures[schema].runtime_dsn, min_size=1, max_size=max_size)
        assert created is not None
        yield created
        await created.close()

    pool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(schema, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=MigratedSchema)]
    )
    return pytest.fixture(name=name)(pool)


__all__ = ["TEST_SERVICE_MIGRATIONS", "migrated_schema_fixture", "migrations_of", "runtime_pool_fixture"]
