"""The window read's plan: the rows of transactions running at the window's start are looked up by
(shard, xid), whatever plan the server picks for the prepared statement, so a read costs what the window
holds, not what the shard holds."""

from __future__ import annotations

import json
import uuid

import asyncpg

from tests.conftest import MigratedSchema
from yovision_platform.outbox import Outbox, OutboxMessage, outbox_shard
from yovision_platform.outbox_publisher import OUTBOX_TABLE
from yovision_platform.outbox_windows import OutboxWindows, WindowPosition

SHARD_ROWS = 20_000
# A window of one row reads a few index and heap pages; the shard's 20,000 rows fill several hundred.
WINDOW_READ_MAX_BUFFERS = 60


def _message(key: bytes) -> OutboxMessage:
    return OutboxMessage(uuid.uuid4(), "TestEvent", "t", key, b"v" * 200)


async def test_a_window_read_touches_the_window_not_the_shard_on_a_generic_plan_and_stale_statistics(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema, admin_conn: asyncpg.Connection
) -> None:
    key = b"one-key"
    shard = outbox_shard(key)
    outbox = Outbox(migrated.name)
    # Statistics of a young table (a few rows), as autovacuum leaves them on one that then grows.
    async with runtime_pool.acquire() as conn, conn.transaction():
        await outbox.enqueue_many(conn, [_message(f"key-{n}".encode()) for n in range(12)])
    await admin_conn.execute(f"ANALYZE {migrated.name.quoted}.{OUTBOX_TABLE}")
    async with runtime_pool.acquire() as conn, conn.transaction():
        await outbox.enqueue_many(conn, [_message(key) for _ in range(SHARD_ROWS)])
    # A transaction of the shard still running when the window's start is taken: the case looked up by xid.
    running = await runtime_pool.acquire()
    tx = running.transaction()
    await tx.start()
    try:
        await outbox.enqueue(running, _message(key))
        async with runtime_pool.acquire() as conn:
            start: str = await conn.fetchval("SELECT pg_current_snapshot()::text")
        await tx.commit()
    except BaseException:
        await tx.rollback()
        raise
    finally:
        await runtime_pool.release(running)
    windows = OutboxWindows(
        f"{migrated.name.quoted}.{OUTBOX_TABLE}", ("topic", "message_key", "value", "headers")
    )
    async with runtime_pool.acquire() as conn:
        await conn.execute("SET plan_cache_mode = force_generic_plan")  # as a prepared statement's, later
        _, rows = await windows.rows(conn, shard, WindowPosition(start, start), 10)
        assert len(rows) == 1
        plan = json.loads(
            await conn.fetchval(
                f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {windows._rows_sql}", shard, start, None, 0, 10
            )
        )[0]["Plan"]
        await conn.execute("RESET plan_cache_mode")
    touched = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
    assert touched <= WINDOW_READ_MAX_BUFFERS, f"the read touched {touched} buffers"
