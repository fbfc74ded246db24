"""Outbox size after N events relayed while a snapshot is held open (default 1,000,000 events, 60 s).

A REPEATABLE READ transaction takes a snapshot and holds it (so VACUUM can remove nothing newer), a relay
process relays, and N rows are inserted server-side in transactions of FILL_TRANSACTION_ROWS (1,000 keys,
~240-byte values, shards as the writers compute them). Once every row is relayed and the snapshot released,
the table, index and cursor-table sizes are read. With the insert-only outbox the relay writes nothing per
row, so the table holds N live tuples and no dead one, whatever the held snapshot; the cursor table takes
one update per batch.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from bench.infra import BenchSchema, BenchTopics, Stack
from bench.relay_throughput import relay_processes, wait_all_passed, wait_split
from yovision_platform.messaging import OUTBOX_SHARDS, partition_for_key

__all__ = ["BloatRun", "run_bloat"]

FILL_TRANSACTION_ROWS = 10_000
FILL_KEYS = 1000
VALUE_BYTES = 240

FILL_SQL = """
INSERT INTO {table} (event_id, event_type, topic, message_key, value, headers, shard)
SELECT gen_random_uuid(), 'BenchEvent', $1, k.key, convert_to(repeat('v', $4), 'UTF8'),
       '[["event_type", "BenchEvent"]]'::jsonb, k.shard
  FROM generate_series($2::bigint, $3::bigint) AS n
  JOIN unnest($5::bytea[], $6::smallint[]) WITH ORDINALITY AS k(key, shard, i) ON k.i = 1 + n % $7
"""

SIZES_SQL = """
SELECT pg_relation_size('{schema}.outbox') AS table_bytes,
       pg_indexes_size('{schema}.outbox') AS index_bytes,
       pg_total_relation_size('{schema}.outbox_cursors') AS cursor_bytes,
       (SELECT count(*) FROM {schema}.outbox) AS live_rows,
       (SELECT sum(pg_column_size(o.*)) FROM {schema}.outbox o) AS tuple_bytes
"""
STATS_SQL = """
SELECT coalesce(n_dead_tup, 0) AS dead FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2
"""


@dataclass(frozen=True)
class BloatRun:
    events: int
    held_seconds: float
    fill_seconds: float
    table_bytes: int
    index_bytes: int
    cursor_bytes: int
    live_rows: int
    tuple_bytes: int
    outbox_dead_tuples: int
    cursor_dead_tuples: int

    def as_dict(self) -> dict[str, object]:
        return {
            name: round(value, 3) if isinstance(value, float) else value for name, value in vars(self).items()
        }


async def run_bloat(
    stack: Stack, schema: BenchSchema, topics: BenchTopics, *, events: int, hold_seconds: float
) -> BloatRun:
    prefix = "bloat"
    await topics.for_run(prefix)
    keys = [f"bench-run-{i:04d}".encode() for i in range(FILL_KEYS)]
    shards = [partition_for_key(key, OUTBOX_SHARDS) for key in keys]
    table = f"{schema.name.quoted}.outbox"
    holder = await schema.pool.acquire()
    held = holder.transaction(isolation="repeatable_read")
    await held.start()
    await holder.fetchval("SELECT 1")  # the snapshot is taken now and held
    held_at = time.monotonic()
    try:
        with relay_processes(
            schema, stack.kafka_bootstrap, prefix, relays=1, client="confluent", batch_size=2000
        ):
            await wait_split(schema, 1)
            started = time.monotonic()
            last_xid = 0
            async with schema.pool.acquire() as conn:
                for first in range(0, events, FILL_TRANSACTION_ROWS):
                    last = min(events, first + FILL_TRANSACTION_ROWS) - 1
                    async with conn.transaction():
                        await conn.execute(
                            FILL_SQL.format(table=table),
                            topics.base,
                            first,
                            last,
                            VALUE_BYTES,
                            keys,
                            shards,
                            FILL_KEYS,
                        )
                        last_xid = int(await conn.fetchval("SELECT pg_current_xact_id()::text"))
            fill_seconds = time.monotonic() - started
            await wait_all_passed(schema, last_xid)
            await asyncio.sleep(max(0.0, hold_seconds - (time.monotonic() - held_at)))
            held_for = time.monotonic() - held_at
    finally:
        await held.rollback()
        await schema.pool.release(holder)
    async with schema.pool.acquire() as conn:
        await conn.execute("SELECT pg_stat_force_next_flush()")
        sizes = await conn.fetchrow(SIZES_SQL.format(schema=schema.name.quoted))
        assert sizes is not None
        dead_outbox = await conn.fetchval(STATS_SQL, schema.name, "outbox") or 0
        dead_cursors = await conn.fetchval(STATS_SQL, schema.name, "outbox_cursors") or 0
    return BloatRun(
        events=events,
        held_seconds=held_for,
        fill_seconds=fill_seconds,
        table_bytes=sizes["table_bytes"],
        index_bytes=sizes["index_bytes"],
        cursor_bytes=sizes["cursor_bytes"],
        live_rows=sizes["live_rows"],
        tuple_bytes=int(sizes["tuple_bytes"] or 0),
        outbox_dead_tuples=dead_outbox,
        cursor_dead_tuples=dead_cursors,
    )
