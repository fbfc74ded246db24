from __future__ import annotations

import shutil
from pathlib import Path

import asyncpg
import pytest

from tests.integration.platform.conftest import FIXTURE_MIGRATIONS, plan_for
from tests.support.stack import MigratedSchema, Stack, runtime_dsn_for
from yovision_platform.errors import MigrationError, SchemaOutdated, UnsafeRole
from yovision_platform.storage import Identifier, SchemaPlan, migrate, preflight

CATALOG_SNAPSHOT = """
SELECT 'column' AS kind, table_name || '.' || column_name || ':' || data_type AS item
  FROM information_schema.columns WHERE table_schema = $1
UNION ALL
SELECT 'constraint', conrelid::regclass::text || ':' || conname || ':' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = $1::regnamespace
UNION ALL
SELECT 'index', indexname || ':' || indexdef FROM pg_indexes WHERE schemaname = $1
UNION ALL
SELECT 'grant', table_name || ':' || grantee || ':' || privilege_type
  FROM information_schema.role_table_grants WHERE table_schema = $1
UNION ALL
SELECT 'column_grant', table_name || '.' || column_name || ':' || grantee || ':' || privilege_type
  FROM information_schema.column_privileges WHERE table_schema = $1
UNION ALL
SELECT 'migration', track || ':' || version || ':' || checksum || ':' || applied_at::text
  FROM {schema}.schema_migrations
ORDER BY 1, 2
"""


async def snapshot(admin: asyncpg.Connection, schema: str) -> list[tuple[str, str]]:
    rows = await admin.fetch(CATALOG_SNAPSHOT.replace("{schema}", f'"{schema}"'), schema)
    return [(r["kind"], r["item"]) for r in rows]


async def test_replaying_all_migrations_twice_changes_nothing(
    admin_conn: asyncpg.Connection, migrated: MigratedSchema
) -> None:
    before = await snapshot(admin_conn, migrated.name)
    assert any(kind == "migration" for kind, _ in before)
    for _ in range(2):
        applied = await migrate(admin_conn, plan_for(migrated.name))
        assert applied == []
    assert await snapshot(admin_conn, migrated.name) == before


async def test_a_changed_applied_migration_is_refused(
    admin_conn: asyncpg.Connection, migrated: MigratedSchema, tmp_path: Path
) -> None:
    changed = tmp_path / "migrations"
    shutil.copytree(FIXTURE_MIGRATIONS, changed)
    target = changed / "0001_test_service.sql"
    target.write_text(target.read_text() + "\n-- edited after release\n")
    with pytest.raises(MigrationError) as caught:
        await migrate(admin_conn, SchemaPlan.for_service(migrated.name, changed))
    assert caught.value.code == "migration_checksum_mismatch"


async def test_a_new_migration_is_applied_once_on_top(
    admin_conn: asyncpg.Connection, migrated: MigratedSchema, tmp_path: Path
) -> None:
    extended = tmp_path / "migrations"
    shutil.copytree(FIXTURE_MIGRATIONS, extended)
    (extended / "0002_more.sql").write_text("ALTER TABLE jobs ADD COLUMN note text;\n")
    plan = SchemaPlan.for_service(migrated.name, extended)
    assert [m.name for m in await migrate(admin_conn, plan)] == ["more"]
    assert await migrate(admin_conn, plan) == []


async def test_runtime_role_passes_preflight_but_cannot_change_the_schema(migrated: MigratedSchema) -> None:
    conn = await asyncpg.connect(migrated.runtime_dsn)
    try:
        await preflight(conn, plan_for(migrated.name))
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f'CREATE TABLE "{migrated.name}".sneaky (id int)')
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f'DROP TABLE "{migrated.name}".jobs')
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f'UPDATE "{migrated.name}".outbox SET value = $1', b"x")
    finally:
        await conn.close()


async def test_public_has_no_access_to_the_schema(
    admin_conn: asyncpg.Connection, migrated: MigratedSchema
) -> None:
    public_usage = await admin_conn.fetchval(
        "SELECT has_schema_privilege('public', $1, 'USAGE')", migrated.name
    )
    assert public_usage is False


async def test_preflight_refuses_an_outdated_schema(
    admin_conn: asyncpg.Connection, migrated: MigratedSchema, tmp_path: Path
) -> None:
    newer = tmp_path / "migrations"
    shutil.copytree(FIXTURE_MIGRATIONS, newer)
    (newer / "0002_newer.sql").write_text("SELECT 1;\n")
    conn = await asyncpg.connect(migrated.runtime_dsn)
    try:
        with pytest.raises(SchemaOutdated):
            await preflight(conn, SchemaPlan.for_service(migrated.name, newer))
    finally:
        await conn.close()


async def test_preflight_refuses_a_superuser(stack: Stack, migrated: MigratedSchema) -> None:
    conn = await asyncpg.connect(stack.admin_dsn)
    try:
        with pytest.raises(UnsafeRole):
            await preflight(conn, plan_for(migrated.name))
    finally:
        await conn.close()


async def test_preflight_refuses_a_role_that_belongs_to_the_owner(
    stack: Stack, admin_conn: asyncpg.Connection, migrated: MigratedSchema
) -> None:
    await admin_conn.execute(f'GRANT "{migrated.name}_owner" TO "{migrated.runtime_role}"')
    conn = await asyncpg.connect(migrated.runtime_dsn)
    try:
        with pytest.raises(UnsafeRole):
            await preflight(conn, plan_for(migrated.name))
    finally:
        await conn.close()


async def test_preflight_refuses_a_missing_schema(stack: Stack, migrated: MigratedSchema) -> None:
    conn = await asyncpg.connect(migrated.runtime_dsn)
    try:
        with pytest.raises(SchemaOutdated):
            await preflight(conn, plan_for(Identifier(migrated.name + "_absent")))
    finally:
        await conn.close()


def test_runtime_dsn_helper_keeps_host_and_database(stack: Stack) -> None:
    dsn = runtime_dsn_for(stack.admin_dsn, "r", "p")
    assert dsn.startswith("postgresql://r:p@") and dsn.endswith("/yovision")


async def test_preflight_refuses_a_role_without_the_migration_grants(
    stack: Stack, admin_conn: asyncpg.Connection, migrated: MigratedSchema
) -> None:
    renamed = f"{migrated.name}_renamed"
    await admin_conn.execute(f"CREATE ROLE \"{renamed}\" LOGIN PASSWORD 'pw-{migrated.runtime_password}'")
    try:
        await admin_conn.execute(f'GRANT USAGE ON SCHEMA "{migrated.name}" TO "{renamed}"')
        conn = await asyncpg.connect(
            runtime_dsn_for(stack.admin_dsn, renamed, f"pw-{migrated.runtime_password}")
        )
        try:
            with pytest.raises(SchemaOutdated) as caught:
                await preflight(conn, plan_for(migrated.name))
            assert caught.value.code == "runtime_role_not_granted"
        finally:
            await conn.close()
    finally:
        await admin_conn.execute(f'DROP OWNED BY "{renamed}"')
        await admin_conn.execute(f'DROP ROLE "{renamed}"')


async def test_migrations_of_several_schemas_can_run_at_once(
    stack: Stack, admin_conn: asyncpg.Connection
) -> None:
    import asyncio

    from tests.support.stack import drop_schema_and_roles, unique_name

    names = [Identifier(unique_name("t")) for _ in range(3)]

    async def migrate_one(name: Identifier) -> int:
        conn = await asyncpg.connect(stack.admin_dsn)
        try:
            return len(await migrate(conn, plan_for(name), runtime_password="pw"))
        finally:
            await conn.close()

    try:
        applied = await asyncio.gather(*(migrate_one(name) for name in names))
        assert applied == [len(plan_for(names[0]).migrations)] * 3
    finally:
        for name in names:
            await drop_schema_and_roles(admin_conn, name)
