"""Schema `bell` rules enforced by PostgreSQL itself: an immutable audit trail, receipts that only expire."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from bell_receiver.entrypoints.main import postgres_use_cases
from bell_receiver.entrypoints.receipt_purge_worker import receipt_purge_worker
from bell_receiver.service_layer.metrics import BellMetrics
from tests.support.kafka import wait_until
from tests.support.stack import MigratedSchema
from yovision_platform.storage import Identifier

APPEND_ONLY = "append-only"


async def insert_audit_row(conn: asyncpg.Connection, schema: str) -> uuid.UUID:
    event_id = uuid.uuid4()
    await conn.execute(
        f"""INSERT INTO "{schema}".audit_events (source_system, event_id, event_type, action, occurred_at,
                                                 channel, payload, payload_digest)
            VALUES ('sense', $1, 'DeviceAuditRecorded', 'device.created', now(), 'http_relay', '{{}}', $2)""",
        event_id,
        hashlib.sha256(b"{}").digest(),
    )
    return event_id


@pytest.fixture
async def runtime_conn(bell_schema: MigratedSchema) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(bell_schema.runtime_dsn)
    yield conn
    await conn.close()


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE \"{s}\".audit_events SET actor = 'mallory'",
        'DELETE FROM "{s}".audit_events',
        'TRUNCATE "{s}".audit_events',
    ],
)
async def test_the_runtime_role_cannot_change_the_audit_trail(
    runtime_conn: asyncpg.Connection, bell_schema: MigratedSchema, statement: str
) -> None:
    await insert_audit_row(runtime_conn, bell_schema.name)
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
        await runtime_conn.execute(statement.format(s=bell_schema.name))
    assert await runtime_conn.fetchval(f'SELECT count(*) FROM "{bell_schema.name}".audit_events') == 1


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE \"{s}\".audit_events SET actor = 'mallory'",
        'DELETE FROM "{s}".audit_events',
        'TRUNCATE "{s}".audit_events',
    ],
)
async def test_the_trigger_blocks_changes_even_for_the_owner(
    admin_conn: asyncpg.Connection, bell_schema: MigratedSchema, statement: str
) -> None:
    s = bell_schema.name
    async with admin_conn.transaction():
        await admin_conn.execute(f'SET LOCAL ROLE "{s}_owner"')
        await insert_audit_row(admin_conn, s)
    async with admin_conn.transaction():
        await admin_conn.execute(f'SET LOCAL ROLE "{s}_owner"')
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match=APPEND_ONLY):
            await admin_conn.execute(statement.format(s=s))
    assert await admin_conn.fetchval(f'SELECT count(*) FROM "{s}".audit_events') == 1


async def test_one_row_per_source_system_and_event_id(
    runtime_conn: asyncpg.Connection, bell_schema: MigratedSchema
) -> None:
    event_id = await insert_audit_row(runtime_conn, bell_schema.name)
    with pytest.raises(asyncpg.UniqueViolationError):
        await runtime_conn.execute(
            f"""INSERT INTO "{bell_schema.name}".audit_events (source_system, event_id, event_type, action,
                    occurred_at, channel, payload, payload_digest)
                VALUES ('sense', $1, 'X', 'x', now(), 'kafka', '{{}}', $2)""",
            event_id,
            b"\x00" * 32,
        )


async def insert_receipt(conn: asyncpg.Connection, schema: str, nonce: str) -> None:
    # received_at/expires_at are given in the past on purpose: the database clock must overrule them
    await conn.execute(
        f"""INSERT INTO "{schema}".audit_relay_receipts (key_id, nonce, request_digest, response_status,
                                                         response_body, received_at, expires_at)
            VALUES ('k1', $1, $2, 200, $3, now() - interval '1 hour', now() - interval '50 minutes')""",
        nonce,
        b"\x01" * 32,
        json.dumps({"ok": True}).encode(),
    )


async def test_the_runtime_role_cannot_delete_an_unexpired_receipt(
    runtime_conn: asyncpg.Connection, bell_schema: MigratedSchema
) -> None:
    s = bell_schema.name
    await insert_receipt(runtime_conn, s, "n1")
    seconds = await runtime_conn.fetchval(
        f'SELECT extract(epoch FROM expires_at - received_at) FROM "{s}".audit_relay_receipts'
    )
    assert seconds == 600
    assert await runtime_conn.fetchval(f'SELECT expires_at > now() FROM "{s}".audit_relay_receipts')
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="only expired receipts"):
        await runtime_conn.execute(f'DELETE FROM "{s}".audit_relay_receipts WHERE nonce = $1', "n1")
    for statement in (
        f'UPDATE "{s}".audit_relay_receipts SET expires_at = now()',
        f'TRUNCATE "{s}".audit_relay_receipts',
    ):
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
            await runtime_conn.execute(statement)
    assert await runtime_conn.fetchval(f'SELECT count(*) FROM "{s}".audit_relay_receipts') == 1


async def test_the_runtime_role_deletes_an_expired_receipt(
    runtime_conn: asyncpg.Connection, admin_conn: asyncpg.Connection, bell_schema: MigratedSchema
) -> None:
    s = bell_schema.name
    await insert_receipt(runtime_conn, s, "old")
    await insert_receipt(runtime_conn, s, "fresh")
    await admin_conn.execute(  # age one receipt past its 600 s (owner-only, as an operator would)
        f"""UPDATE "{s}".audit_relay_receipts
               SET received_at = now() - interval '601 seconds', expires_at = now() - interval '1 second'
             WHERE nonce = 'old'"""
    )
    deleted = await runtime_conn.execute(f'DELETE FROM "{s}".audit_relay_receipts WHERE expires_at <= now()')
    assert deleted == "DELETE 1"
    assert await runtime_conn.fetchval(f'SELECT array_agg(nonce) FROM "{s}".audit_relay_receipts') == [
        "fresh"
    ]


async def test_the_purge_worker_removes_only_expired_receipts(
    runtime_pool: asyncpg.Pool, admin_conn: asyncpg.Connection, bell_schema: MigratedSchema
) -> None:
    s = bell_schema.name
    async with runtime_pool.acquire() as conn:
        await insert_receipt(conn, s, "old")
        await insert_receipt(conn, s, "fresh")
    await admin_conn.execute(
        f"""UPDATE "{s}".audit_relay_receipts
               SET received_at = now() - interval '700 seconds', expires_at = now() - interval '100 seconds'
             WHERE nonce = 'old'"""
    )
    stop = asyncio.Event()
    use_cases = postgres_use_cases(runtime_pool, Identifier(s), BellMetrics.create(CollectorRegistry()))
    task = asyncio.create_task(receipt_purge_worker(use_cases.receipt_purger, interval_seconds=0.05)(stop))

    async def purged() -> bool:
        return bool(await runtime_pool.fetchval(f'SELECT count(*) = 1 FROM "{s}".audit_relay_receipts'))

    try:
        await wait_until(purged, timeout_seconds=10)
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
    assert await runtime_pool.fetchval(f'SELECT nonce FROM "{s}".audit_relay_receipts') == "fresh"
