"""The window read's plan: the rows of transactions running at the window's start are looked up by
(shard, xid), whatever plan the server picks for the prepared statement, so a read costs what the window
holds, not what the shard holds."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import pytest

from tests.support.stack import MigratedSchema
from yovision_platform.messaging import (
    OUTBOX_TABLE,
    Outbox,
    OutboxMessage,
    OutboxWindows,
    WindowPosition,
    outbox_shard,
)

SHARD_ROWS = 20_000
# A window of one row reads a few index and heap pages; the shard's 20,000 rows fill several hundred.
WINDOW_READ_MAX_BUFFERS = 60


def _message(key: bytes) -> OutboxMessage:
    return OutboxMessage(uuid.uuid4(), "TestEvent", "t", key, b"v" * 200)


def _nodes(plan: dict[str, Any], depth: int = 0) -> list[str]:
    """The plan's nodes, one line each (for the failure message)."""
    touched = plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)
    line = f"{'  ' * depth}{plan['Node Type']} {plan.get('Index Name', '')} rows={plan.get('Actual Rows')} "
    lines = [f"{line}buffers={touched}"]
    for child in plan.get("Plans", []):
        lines += _nodes(child, depth + 1)
    return lines


@pytest.mark.parametrize("statistics", ["none", "young", "grown"])
async def test_a_window_read_touches_the_window_not_the_shard_on_a_generic_plan(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema, admin_conn: asyncpg.Connection, statistics: str
) -> None:
    """Whatever the table's statistics: none yet, a young table's (a few rows, as autovacuum leaves them on
    a table that then grows), or those of the grown table (one bulk transaction fills most of the sample)."""
    key = b"one-key"
    shard = outbox_shard(key)
    outbox = Outbox(migrated.name)
    table = f"{migrated.name.quoted}.{OUTBOX_TABLE}"
    async with runtime_pool.acquire() as conn, conn.transaction():
        await outbox.enqueue_many(conn, [_message(f"key-{n}".encode()) for n in range(12)])
    if statistics == "young":
        await admin_conn.execute(f"ANALYZE {table}")
    async with runtime_pool.acquire() as conn, conn.transaction():
        await outbox.enqueue_many(conn, [_message(key) for _ in range(SHARD_ROWS)])
    if statistics == "grown":
        await admin_conn.execute(f"ANALYZE {table}")
    # A transaction of the shard still running when the window's start is taken: the case looked up by xid.
    running = await runtime_pool.acquire()
    tx = running.transaction()
    await tx.start()
    try:
        await outbox.enqueue(running, _message(key))
        running_xid = await running.fetchval("SELECT pg_current_xact_id()::text")
        async with runtime_pool.acquire() as conn:
            # A later transaction ends first, so the running one is below the snapshot's xmax, in its list
            # of running transactions (on a quiet server it would be the newest, at xmax, and read by the
            # window's other branch).
            async with conn.transaction():
                await conn.fetchval("SELECT pg_current_xact_id()")
            start: str = await conn.fetchval("SELECT pg_current_snapshot()::text")
            running_at_start = await conn.fetchval(
                "SELECT $1::text::xid8 = ANY(ARRAY(SELECT pg_snapshot_xip($2::text::pg_snapshot)))",
                running_xid,
                start,
            )
            assert running_at_start
        await tx.commit()
    except BaseException:
        await tx.rollback()
        raise
    finally:
        await runtime_pool.release(running)
    windows = OutboxWindows(table, ("topic", "message_key", "value", "headers"))
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
    assert touched <= WINDOW_READ_MAX_BUFFERS, "\n".join(
        [f"the read touched {touched} buffers", *_nodes(plan)]
    )
