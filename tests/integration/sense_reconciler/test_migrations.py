"""The sense schema: replayable, constrained, least privilege, ownership backfilled without URIs."""

from __future__ import annotations

import os
import secrets
import shutil
import uuid
from pathlib import Path

import asyncpg
import pytest

from sense_reconciler.adapters.source_uri_secrets import SourceUriSecrets
from sense_reconciler.adapters.unit_of_work import PostgresSenseUnitOfWork
from sense_reconciler.service_layer.source_uris import SourceUris
from tests.support.sense_reconciler_fixtures import MIGRATIONS, sense_plan
from tests.support.stack import MigratedSchema, Stack, runtime_dsn_for
from yovision_platform.security import EncryptionKeyRing, rotate_keys
from yovision_platform.storage import Identifier, migrate


async def test_migrations_apply_once_and_replay_without_change(
    admin_conn: asyncpg.Connection, sense_schema: MigratedSchema
) -> None:
    plan = sense_plan(sense_schema.name)
    assert await migrate(admin_conn, plan) == []
    assert await migrate(admin_conn, plan) == []
    tables = await admin_conn.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", sense_schema.name
    )
    assert {r["table_name"] for r in tables} >= {
        "sites",
        "devices",
        "reconcile_state",
        "media_path_ownership",
        "device_operation_outbox",
        "outbox",
    }


async def test_site_limit_defaults_to_16_and_accepts_only_1_to_128(
    sense_pool: asyncpg.Pool, sense_schema: MigratedSchema
) -> None:
    table = f'"{sense_schema.name}".sites'
    async with sense_pool.acquire() as conn:
        await conn.execute(
            f"INSERT INTO {table} (tenant_id, site_id, media_server_id) VALUES ('t', 'default', 'mtx-a')"
        )
        assert await conn.fetchval(f"SELECT max_video_channels FROM {table} WHERE site_id = 'default'") == 16
        insert = f"INSERT INTO {table} (tenant_id, site_id, max_video_channels, media_server_id) "
        for ok in (1, 128):
            await conn.execute(insert + "VALUES ('t', $1, $2, 'mtx-a')", f"s{ok}", ok)
        for bad in (0, 129):
            with pytest.raises(asyncpg.CheckViolationError):
                await conn.execute(insert + "VALUES ('t', $1, $2, 'mtx-a')", f"s{bad}", bad)
        with pytest.raises(asyncpg.CheckViolationError):  # a server id is an operator id, never a URL
            await conn.execute(insert + "VALUES ('t', 'u', 16, 'http://10.0.0.1:9997')")


async def test_runtime_role_cannot_delete_facts_or_devices_or_change_path_names(
    sense_pool: asyncpg.Pool, sense_schema: MigratedSchema
) -> None:
    s = sense_schema.name
    for statement in (
        f'DELETE FROM "{s}".device_operation_outbox',
        f'DELETE FROM "{s}".devices',
        f"UPDATE \"{s}\".devices SET path_name = 'x'",
        f"UPDATE \"{s}\".device_operation_outbox SET action = 'x.y'",
        f'TRUNCATE "{s}".media_path_ownership',
        f'CREATE TABLE "{s}".evil (id int)',
    ):
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await sense_pool.execute(statement)


async def test_ownership_is_backfilled_from_existing_devices_without_uris(
    stack: Stack, admin_conn: asyncpg.Connection, schema_name: Identifier, tmp_path: Path
) -> None:
    first_only = tmp_path / "migrations"
    first_only.mkdir()
    shutil.copy(MIGRATIONS / "0001_devices.sql", first_only)
    password = secrets.token_urlsafe(16)
    await migrate(admin_conn, sense_plan(schema_name, first_only), runtime_password=password)
    dsn = runtime_dsn_for(stack.admin_dsn, f"{schema_name}_app", password)
    conn = await asyncpg.connect(dsn)
    device_id = uuid.uuid4()
    try:
        await conn.execute(f"INSERT INTO \"{schema_name}\".sites (tenant_id, site_id) VALUES ('t', 's')")
        await conn.execute(
            f'INSERT INTO "{schema_name}".devices (id, tenant_id, site_id, name, path_name, source_uri, '
            "desired_state) VALUES ($1, 't', 's', 'cam', 'cam-path', 'rtsp://u:pw@h/x', 'enabled')",
            device_id,
        )
    finally:
        await conn.close()
    await migrate(admin_conn, sense_plan(schema_name))
    rows = await admin_conn.fetch(f'SELECT * FROM "{schema_name}".media_path_ownership')
    assert [(r["device_id"], r["path_name"]) for r in rows] == [(device_id, "cam-path")]
    columns = await admin_conn.fetch(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 "
        "AND table_name IN ('media_path_ownership', 'device_operation_outbox', 'reconcile_state')",
        schema_name,
    )
    assert not any("uri" in r["column_name"] or "source" in r["column_name"] for r in columns)


async def test_devices_from_before_the_fleet_stay_on_default_and_their_uris_get_encrypted(
    stack: Stack, admin_conn: asyncpg.Connection, schema_name: Identifier, tmp_path: Path
) -> None:
    before_fleet = tmp_path / "migrations"
    before_fleet.mkdir()
    shutil.copy(MIGRATIONS / "0001_devices.sql", before_fleet)
    password = secrets.token_urlsafe(16)
    await migrate(admin_conn, sense_plan(schema_name, before_fleet), runtime_password=password)
    pool = await asyncpg.create_pool(runtime_dsn_for(stack.admin_dsn, f"{schema_name}_app", password))
    assert pool is not None
    device_id, uri = uuid.uuid4(), "rtsp://u:old-pw-77@h/x"
    try:
        await pool.execute(f"INSERT INTO \"{schema_name}\".sites (tenant_id, site_id) VALUES ('t', 's')")
        await pool.execute(
            f'INSERT INTO "{schema_name}".devices (id, tenant_id, site_id, name, path_name, source_uri, '
            "desired_state) VALUES ($1, 't', 's', 'cam', 'site-s/cam', $2, 'enabled')",
            device_id,
            uri,
        )
        await migrate(admin_conn, sense_plan(schema_name))
        s = f'"{schema_name}"'
        assert await pool.fetchval(f"SELECT media_server_id FROM {s}.sites") == "default"
        assert await pool.fetchval(f"SELECT media_server_id FROM {s}.devices") == "default"
        placements = await pool.fetch(
            f"SELECT device_id, media_server_id, path_name FROM {s}.media_path_placements"
        )
        assert [tuple(r) for r in placements] == [(device_id, "default", "site-s/cam")]
        owners = await pool.fetch(f"SELECT media_server_id, path_name FROM {s}.media_path_ownership")
        assert [tuple(r) for r in owners] == [("default", "site-s/cam")]
        # the service encrypts the cleartext rows (at start-up): the cleartext is gone, the URI reads back
        ring = EncryptionKeyRing({"k1": os.urandom(32)}, "k1")
        report = await rotate_keys(pool, SourceUriSecrets(schema_name, legacy_only=True), ring)
        assert (report.rotated, report.unreadable) == (1, {})
        row = await pool.fetchrow(f"SELECT source_uri, source_uri_ciphertext FROM {s}.devices")
        assert row["source_uri"] is None and b"old-pw-77" not in bytes(row["source_uri_ciphertext"])
        async with PostgresSenseUnitOfWork(pool, schema_name) as uow:
            stored = await uow.devices.stored_source(device_id)
        assert SourceUris(ring).reveal(device_id, stored) == uri
    finally:
        await pool.close()


async def test_a_writer_of_the_previous_release_puts_new_devices_on_their_sites_server(
    sense_schema: MigratedSchema,
) -> None:
    """During a rolling upgrade a previous-release writer inserts without a server: the site gets the legacy
    'default', a device and its reconcile row get the server of the site they are on."""
    s = f'"{sense_schema.name}"'
    pool = await asyncpg.create_pool(sense_schema.runtime_dsn, min_size=1, max_size=1)
    assert pool is not None
    try:
        await pool.execute(f"INSERT INTO {s}.sites (tenant_id, site_id) VALUES ('t', 'old')")
        await pool.execute(
            f"INSERT INTO {s}.sites (tenant_id, site_id, media_server_id) VALUES ('t', 'moved', 'mtx-b')"
        )
        for site in ("old", "moved"):
            device_id = uuid.uuid4()
            await pool.execute(
                f"INSERT INTO {s}.devices (id, tenant_id, site_id, name, path_name, source_uri, "
                "desired_state) VALUES ($1, 't', $2, 'cam', $3, 'rtsp://h/x', 'enabled')",
                device_id,
                site,
                f"site-{site}/cam",
            )
            await pool.execute(
                f"INSERT INTO {s}.reconcile_state (device_id, partition) VALUES ($1, 0)", device_id
            )
        rows = await pool.fetch(
            f"SELECT d.site_id, d.media_server_id AS device, r.media_server_id AS state FROM {s}.devices d "
            f"JOIN {s}.reconcile_state r ON r.device_id = d.id ORDER BY d.site_id"
        )
        assert [tuple(r) for r in rows] == [("moved", "mtx-b", "mtx-b"), ("old", "default", "default")]
    finally:
        await pool.close()
