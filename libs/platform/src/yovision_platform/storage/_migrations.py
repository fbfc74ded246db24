"""Versioned SQL migrations per schema, plus the start-up preflight that guards the runtime role.

Layout of a service's schema (all created by `migrate`, run with an admin DSN):

    <schema>            owned by <schema>_owner (NOLOGIN), USAGE for the runtime role, nothing for PUBLIC
    <schema>_owner      owns every object; migrations run under SET ROLE to it
    <runtime role>      LOGIN, no DDL, only the grants the migration files give it

Migration files are `NNNN_<name>.sql` in tracks: the platform track (outbox, idempotent-consumer tables)
is applied before the service's own track. Each file runs in the same transaction as the row recording it,
under one cluster-wide advisory lock, so concurrent `migrate` runs (of any service) serialize and a
failed file leaves nothing.
A file's checksum is recorded; an applied file whose content changed is refused, never re-run.

Files may use the placeholders `{{schema}}`, `{{owner_role}}` and `{{runtime_role}}`; they are replaced by
quoted, validated identifiers (the checksum covers the file as written, before substitution).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from yovision_platform.errors import MigrationError, SchemaOutdated, UnsafeRole
from yovision_platform.storage._db import DbConnection, Identifier

__all__ = [
    "PLATFORM_TRACK",
    "Migration",
    "SchemaPlan",
    "drop",
    "load_migrations",
    "migrate",
    "platform_migrations",
    "preflight",
]

PLATFORM_TRACK = "platform"
SERVICE_TRACK = "service"
# One advisory lock for every schema's migrate and drop: both touch shared catalogs (roles, the database ACL).
MIGRATION_LOCK_NAME = "yovision:migrate"
_FILE_PATTERN = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    track: str
    version: int
    name: str
    sql: str
    checksum: str


@dataclass(frozen=True)
class SchemaPlan:
    """Everything `migrate` and `preflight` need to know about one service schema."""

    schema: Identifier
    owner_role: Identifier
    runtime_role: Identifier
    migrations: tuple[Migration, ...]

    @classmethod
    def for_service(
        cls, schema: str, service_migrations_dir: Path, *, runtime_role: str | None = None
    ) -> SchemaPlan:
        name = Identifier(schema)
        return cls(
            schema=name,
            owner_role=Identifier(f"{name}_owner"),
            runtime_role=Identifier(runtime_role or f"{name}_app"),
            migrations=(*platform_migrations(), *load_migrations(service_migrations_dir, SERVICE_TRACK)),
        )

    def latest_versions(self) -> dict[str, int]:
        latest: dict[str, int] = {}
        for migration in self.migrations:
            latest[migration.track] = max(latest.get(migration.track, 0), migration.version)
        return latest


def _parse(track: str, filename: str, text: str) -> Migration:
    match = _FILE_PATTERN.fullmatch(filename)
    if match is None:
        raise MigrationError("bad_migration_name", f"migration file name must be NNNN_name.sql: {filename}")
    checksum = hashlib.sha256(text.encode()).hexdigest()
    return Migration(track, int(match.group(1)), match.group(2), text, checksum)


def _checked_sequence(migrations: list[Migration]) -> list[Migration]:
    migrations.sort(key=lambda m: m.version)
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise MigrationError(
                "migration_gap", f"{migration.track} migrations must be numbered 1..n without gaps"
            )
    return migrations


def load_migrations(directory: Path, track: str) -> list[Migration]:
    files = sorted(p for p in directory.glob("*.sql") if p.is_file())
    return _checked_sequence([_parse(track, p.name, p.read_text(encoding="utf-8")) for p in files])


def platform_migrations() -> list[Migration]:
    folder = resources.files("yovision_platform.storage") / "sql"
    found = [
        _parse(PLATFORM_TRACK, entry.name, entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    ]
    return _checked_sequence(found)


def _render(sql: str, plan: SchemaPlan) -> str:
    return (
        sql.replace("{{schema}}", plan.schema.quoted)
        .replace("{{owner_role}}", plan.owner_role.quoted)
        .replace("{{runtime_role}}", plan.runtime_role.quoted)
    )


async def _ensure_role(conn: DbConnection, role: Identifier, *, login: bool) -> None:
    exists = await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", str(role))
    attributes = "LOGIN" if login else "NOLOGIN"
    verb = "ALTER" if exists else "CREATE"
    await conn.execute(
        f"{verb} ROLE {role.quoted} {attributes} "
        "NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
    )


async def _set_password(conn: DbConnection, role: Identifier, password: str) -> None:
    # ALTER ROLE takes no bind parameters; format() quotes the literal server-side.
    statement = await conn.fetchval(
        "SELECT format('ALTER ROLE %I PASSWORD %L', $1::text, $2::text)", role, password
    )
    await conn.execute(statement)


async def _prepare_schema(conn: DbConnection, plan: SchemaPlan, runtime_password: str | None) -> None:
    await _ensure_role(conn, plan.owner_role, login=False)
    await _ensure_role(conn, plan.runtime_role, login=True)
    if runtime_password is not None:
        await _set_password(conn, plan.runtime_role, runtime_password)
    is_superuser = await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    if not is_superuser:
        await conn.execute(f"GRANT {plan.owner_role.quoted} TO CURRENT_USER")
    database = await conn.fetchval("SELECT current_database()")
    await conn.execute(f'GRANT CONNECT ON DATABASE "{database}" TO {plan.runtime_role.quoted}')
    await conn.execute(
        f"CREATE SCHEMA IF NOT EXISTS {plan.schema.quoted} AUTHORIZATION {plan.owner_role.quoted}"
    )
    await conn.execute(f"REVOKE ALL ON SCHEMA {plan.schema.quoted} FROM PUBLIC")
    await conn.execute(f"GRANT USAGE ON SCHEMA {plan.schema.quoted} TO {plan.runtime_role.quoted}")
    await conn.execute(
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {plan.owner_role.quoted} IN SCHEMA {plan.schema.quoted} "
        "REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC"
    )


async def migrate(
    admin: DbConnection, plan: SchemaPlan, *, runtime_password: str | None = None
) -> list[Migration]:
    """Apply pending migrations; returns those applied now (empty when already current).

    `admin` must be a superuser or a role with CREATEROLE and CREATE on the database.
    """
    applied_now: list[Migration] = []
    async with admin.transaction():
        # One lock for every schema: role and database grants touch shared catalogs, and concurrent GRANTs on
        # one database fail with "tuple concurrently updated". Migrations are rare; serializing them is free.
        await admin.execute(f"SELECT pg_advisory_xact_lock(hashtextextended('{MIGRATION_LOCK_NAME}', 0))")
        await _prepare_schema(admin, plan, runtime_password)
        await admin.execute(f"SET LOCAL ROLE {plan.owner_role.quoted}")
        await admin.execute(f"SET LOCAL search_path = {plan.schema.quoted}")
        await admin.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                track text NOT NULL,
                version integer NOT NULL,
                name text NOT NULL,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (track, version)
            )
            """
        )
        await admin.execute(f"GRANT SELECT ON schema_migrations TO {plan.runtime_role.quoted}")
        rows = await admin.fetch("SELECT track, version, checksum FROM schema_migrations")
        recorded = {(r["track"], r["version"]): r["checksum"] for r in rows}
        for migration in plan.migrations:
            key = (migration.track, migration.version)
            if key in recorded:
                if recorded[key] != migration.checksum:
                    raise MigrationError(
                        "migration_checksum_mismatch",
                        f"applied migration {migration.track}/{migration.version:04d}_{migration.name} "
                        "was changed after it was applied; write a new migration instead",
                    )
                continue
            await admin.execute(_render(migration.sql, plan))
            await admin.execute(
                "INSERT INTO schema_migrations (track, version, name, checksum) VALUES ($1, $2, $3, $4)",
                migration.track,
                migration.version,
                migration.name,
                migration.checksum,
            )
            applied_now.append(migration)
    return applied_now


async def drop(admin: DbConnection, plan: SchemaPlan) -> None:
    """Remove the schema and both roles (tests, benchmarks, decommissioning). Irreversible."""
    async with admin.transaction():
        await admin.execute(f"SELECT pg_advisory_xact_lock(hashtextextended('{MIGRATION_LOCK_NAME}', 0))")
        await admin.execute(f"DROP SCHEMA IF EXISTS {plan.schema.quoted} CASCADE")
        for role in (plan.runtime_role, plan.owner_role):
            if await admin.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", str(role)):
                await admin.execute(f"DROP OWNED BY {role.quoted} CASCADE")
                await admin.execute(f"DROP ROLE {role.quoted}")


async def preflight(runtime: DbConnection, plan: SchemaPlan) -> None:
    """Refuse to run with an outdated schema or a runtime role that could change it.

    Called at start-up over the runtime DSN. A database that is *ahead* of this build is accepted, so a
    rolling deploy can migrate first and replace instances after.
    """
    role = await runtime.fetchrow(
        """
        SELECT r.rolsuper,
               r.rolcreaterole,
               n.nspowner = r.oid AS owns_schema,
               coalesce(pg_has_role(r.oid, o.oid, 'MEMBER'), false) AS member_of_owner,
               has_schema_privilege(r.oid, n.oid, 'CREATE') AS can_create
          FROM pg_roles r
          LEFT JOIN pg_namespace n ON n.nspname = $1
          LEFT JOIN pg_roles o ON o.rolname = $2
         WHERE r.rolname = current_user
        """,
        plan.schema,
        plan.owner_role,
    )
    if role is None or role["owns_schema"] is None:
        raise SchemaOutdated("schema_missing", f"schema {plan.schema} does not exist; run migrate first")
    if (
        role["rolsuper"]
        or role["rolcreaterole"]
        or role["owns_schema"]
        or role["member_of_owner"]
        or role["can_create"]
    ):
        raise UnsafeRole(
            "unsafe_runtime_role",
            "the runtime role must not be superuser, own the schema, hold CREATE on it "
            "or belong to its owner",
        )
    granted = await runtime.fetchval(
        "SELECT has_table_privilege(current_user, $1, 'SELECT')", f"{plan.schema.quoted}.schema_migrations"
    )
    if not granted:
        raise SchemaOutdated(
            "runtime_role_not_granted",
            f"the runtime role has no grants in schema {plan.schema}; run migrate with this DSN's role",
        )
    rows = await runtime.fetch(
        f"SELECT track, max(version) AS version FROM {plan.schema.quoted}.schema_migrations GROUP BY track"
    )
    current = {r["track"]: r["version"] for r in rows}
    for track, needed in plan.latest_versions().items():
        if current.get(track, 0) < needed:
            raise SchemaOutdated(
                "schema_outdated",
                f"schema {plan.schema} track {track} is at version {current.get(track, 0)}, "
                f"this build needs {needed}; run migrate first",
            )
