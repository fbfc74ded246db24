"""The upgrade to the snapshot-window relay (platform migration 0003) carries an existing outbox over: rows
unpublished at the upgrade are published after it, in id order per key; rows already published are not
published again; a writer of the previous release (no shard, no NOTIFY) still writes rows the relay takes."""

from __future__ import annotations

import dataclasses
import secrets
import uuid
from collections import defaultdict

import asyncpg

from tests.integration.platform.conftest import plan_for
from tests.support.kafka import publish_outbox, read_topic
from tests.support.stack import Stack, runtime_dsn_for
from yovision_platform.messaging import (
    OUTBOX_SHARDS,
    Outbox,
    OutboxMessage,
    OutboxWindows,
    WindowPosition,
    partition_for_key,
)
from yovision_platform.storage import Identifier, migrate

LEGACY_INSERT = """
    INSERT INTO {table} (event_id, event_type, topic, message_key, value, headers, published_at)
    VALUES ($1, 'TestEvent', $2, $3, $4, '[]'::jsonb, CASE WHEN $5 THEN now() END)
"""


async def test_rows_unpublished_at_the_upgrade_are_published_after_it_in_order(
    stack: Stack, admin_conn: asyncpg.Connection, schema_name: Identifier, topic: str
) -> None:
    full = plan_for(schema_name)
    before = dataclasses.replace(
        full, migrations=tuple(m for m in full.migrations if not (m.track == "platform" and m.version >= 3))
    )
    password = secrets.token_urlsafe(16)
    await migrate(admin_conn, before, runtime_password=password)
    table = f"{schema_name.quoted}.outbox"
    expected: dict[bytes, list[bytes]] = defaultdict(list)
    for n in range(60):
        key = f"key-{n % 7}".encode()
        published = n < 20 and n % 2 == 0  # a published row may sit between unpublished ones of its key
        await admin_conn.execute(
            LEGACY_INSERT.format(table=table), uuid.uuid4(), topic, key, f"{n}".encode(), published
        )
        if not published:
            expected[key].append(f"{n}".encode())

    assert [m.name for m in await migrate(admin_conn, full, runtime_password=password)] == [
        "outbox_cursors",
        "processed_events_retention",
        "outbox_xid_statistics",
        "outbox_cursor_one_snapshot",
    ]
    rows = await admin_conn.fetch(f"SELECT message_key, shard, xid IS NULL AS legacy FROM {table}")
    assert all(r["legacy"] == (r["shard"] is None) for r in rows)
    assert all(
        r["shard"] == partition_for_key(r["message_key"], OUTBOX_SHARDS) for r in rows if not r["legacy"]
    )

    # A writer of the previous release inserts without a shard: the database fills it in.
    await admin_conn.execute(
        f"INSERT INTO {table} (event_id, event_type, topic, message_key, value)"
        " VALUES ($1, 'TestEvent', $2, $3, $4)",
        uuid.uuid4(),
        topic,
        b"key-3",
        b"after-upgrade",
    )
    expected[b"key-3"].append(b"after-upgrade")
    assert await admin_conn.fetchval(f"SELECT shard FROM {table} WHERE value = 'after-upgrade'") == (
        partition_for_key(b"key-3", OUTBOX_SHARDS)
    )

    pool = await asyncpg.create_pool(runtime_dsn_for(stack.admin_dsn, f"{schema_name}_app", password))
    assert pool is not None
    try:
        await publish_outbox(pool, schema_name, stack.kafka_bootstrap)
    finally:
        await pool.close()
    records = await read_topic(stack.kafka_bootstrap, topic, expected=sum(map(len, expected.values())))
    seen: dict[bytes, list[bytes]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert record.key is not None and record.value is not None
        seen[record.key].append(record.value)
    assert seen == expected


async def test_a_cursor_left_between_two_snapshots_reads_its_rows_first_after_0006(
    stack: Stack, admin_conn: asyncpg.Connection, schema_name: Identifier
) -> None:
    """0003 wrote each shard's first position with two calls of a VOLATILE function (a snapshot each); a
    transaction of another session that ended between them left cur later than prev. The relay's first read
    was that migration-time window, empty, and its rows came one read later. 0006 starts every such cursor
    at one snapshot: the first read finds the rows."""
    full = plan_for(schema_name)
    before = dataclasses.replace(
        full, migrations=tuple(m for m in full.migrations if not (m.track == "platform" and m.version >= 6))
    )
    await migrate(admin_conn, before, runtime_password=secrets.token_urlsafe(16))
    s = schema_name.quoted
    other = await asyncpg.connect(stack.admin_dsn)
    try:  # the state 0003 left when a transaction ended between its two calls
        prev = await admin_conn.fetchval("SELECT pg_current_snapshot()::text")
        async with other.transaction():
            await other.fetchval("SELECT pg_current_xact_id()")
        await admin_conn.execute(
            f"UPDATE {s}.outbox_cursors SET prev_snapshot = $1::text::pg_snapshot,"
            " cur_snapshot = pg_current_snapshot()",
            prev,
        )
    finally:
        await other.close()
    key = b"k"
    shard = partition_for_key(key, OUTBOX_SHARDS)
    messages = [OutboxMessage(uuid.uuid4(), "TestEvent", "t", key, f"{n}".encode()) for n in range(3)]
    async with admin_conn.transaction():
        await Outbox(schema_name).enqueue_many(admin_conn, messages)
    windows = OutboxWindows(f"{s}.outbox", ("value",))

    async def first_read() -> list[bytes]:
        row = await admin_conn.fetchrow(
            f"SELECT prev_snapshot::text AS prev, cur_snapshot::text AS cur, last_id FROM {s}.outbox_cursors"
            " WHERE outbox = 'outbox' AND shard = $1",
            shard,
        )
        assert row is not None
        _, rows = await windows.rows(
            admin_conn, shard, WindowPosition(row["prev"], row["cur"], row["last_id"]), 10
        )
        return [r["value"] for r in rows]

    assert await first_read() == [], "the fault this repairs: the stale window first"
    assert [m.name for m in await migrate(admin_conn, full)] == ["outbox_cursor_one_snapshot"]
    assert await first_read() == [m.value for m in messages]
