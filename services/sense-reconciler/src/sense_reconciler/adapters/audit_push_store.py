"""The audit push's store on ``<schema>.device_operation_outbox`` (the `AuditPushStore` port): the
platform's snapshot-window cursor and the dead letters.

The outbox is insert-only and read window by window (`yovision_platform.messaging`, one shard: facts
go out in id order, a late-committing fact is never skipped). Its cursor is the row ``(outbox =
'device_operation_outbox', shard = 0)`` of ``outbox_cursors`` (`yovision_platform.messaging`): one
worker holds it at a time, and every write -- advance, back off, renew, release -- is fenced on
(owner, epoch), so a worker whose lease was taken over writes nothing (`CursorFenced`). A rejected fact is
copied to ``device_operation_dead_letters`` with Bell's code in the transaction that moves the cursor past
it. Facts are never deleted or changed. Each call takes a pooled connection of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from sense_reconciler.domain.audit_facts import OutboxFact
from sense_reconciler.service_layer.ports import FactBatch
from yovision_platform.messaging import (
    OutboxWindows,
    ShardCursors,
    ShardLease,
    WindowPosition,
    WindowReader,
    unpassed_count_sql,
)
from yovision_platform.storage import Identifier

__all__ = ["FACT_COLUMNS", "OUTBOX_TABLE", "SHARD", "PostgresAuditPushStore", "PostgresFactReader"]

OUTBOX_TABLE = "device_operation_outbox"
SHARD = 0
FACT_COLUMNS = (
    "event_id",
    "fact_version",
    "action",
    "actor",
    "device_id",
    "tenant_id",
    "site_id",
    "changed_fields",
    "config_version",
    "occurred_at",
)


class PostgresFactReader:
    """The facts after a cursor position, window by window (`yovision_platform.messaging`)."""

    def __init__(self, pool: asyncpg.Pool, reader: WindowReader) -> None:
        self._pool = pool
        self._reader = reader

    async def next_batch(self) -> FactBatch:
        async with self._pool.acquire() as conn:
            batch = await self._reader.next_batch(conn)
        facts = [OutboxFact.from_row(row) for row in batch.rows]
        return FactBatch(facts, batch.before, batch.after)

    def reset(self, position: WindowPosition) -> None:
        self._reader.reset(position)


class PostgresAuditPushStore:
    def __init__(self, pool: asyncpg.Pool, schema: Identifier, owner: str, *, lease_seconds: float) -> None:
        self._pool = pool
        self.cursors = ShardCursors(schema, OUTBOX_TABLE, owner, lease_seconds=lease_seconds)
        s = schema.quoted
        self.windows = OutboxWindows(f"{s}.{OUTBOX_TABLE}", (*FACT_COLUMNS, "trace_parent"), sharded=False)
        columns = ", ".join(FACT_COLUMNS)
        self._dead_letter_sql = f"""
            INSERT INTO {s}.device_operation_dead_letters (outbox_id, {columns}, error_code)
            SELECT o.id, {", ".join(f"o.{c}" for c in FACT_COLUMNS)}, l.code
              FROM unnest($1::bigint[], $2::text[]) AS l(id, code)
              JOIN {s}.{OUTBOX_TABLE} o ON o.id = l.id
            ON CONFLICT (outbox_id) DO NOTHING
        """
        self._pending_sql = unpassed_count_sql(schema, OUTBOX_TABLE, sharded=False)
        self._due_sql = f"""
            SELECT greatest(0, extract(epoch FROM next_attempt_at - now()))::float8
              FROM {s}.outbox_cursors WHERE outbox = '{OUTBOX_TABLE}' AND shard = {SHARD}
        """

    async def acquire(self) -> ShardLease | None:
        async with self._pool.acquire() as conn:
            leases = await self.cursors.acquire(conn, [SHARD])
        return leases[0] if leases else None

    def reader(self, lease: ShardLease, batch_size: int) -> PostgresFactReader:
        return PostgresFactReader(self._pool, WindowReader(self.windows, SHARD, lease.position, batch_size))

    async def record_results(
        self, lease: ShardLease, position: WindowPosition, dead_letters: Sequence[tuple[int, str]]
    ) -> None:
        async with self._pool.acquire() as conn:
            if not dead_letters:  # the fenced advance alone is one statement: atomic without BEGIN/COMMIT
                await self.cursors.advance(conn, SHARD, lease.epoch, position)
                return
            async with conn.transaction():
                await self.cursors.advance(conn, SHARD, lease.epoch, position)
                await conn.execute(
                    self._dead_letter_sql, [i for i, _ in dead_letters], [code for _, code in dead_letters]
                )

    async def fail_batch(
        self, lease: ShardLease, code: str, *, base_seconds: float, cap_seconds: float
    ) -> float:
        """``attempts + 1``, ``next_attempt_at = now() + min(cap, base * 2**attempts)`` (1 s, 2 s, 4 s, ...
        300 s with the defaults), ``last_error_code = code``."""
        async with self._pool.acquire() as conn:
            return await self.cursors.record_failure(
                conn, SHARD, lease.epoch, code, base_seconds=base_seconds, cap_seconds=cap_seconds
            )

    async def renew(self, lease: ShardLease) -> bool:
        async with self._pool.acquire() as conn:
            return SHARD in await self.cursors.renew(conn, {SHARD: lease.epoch})

    async def release(self, lease: ShardLease) -> None:
        async with self._pool.acquire() as conn:
            await self.cursors.release(conn, SHARD, lease.epoch)

    async def retry_in(self) -> float:
        async with self._pool.acquire() as conn:
            wait: float = await conn.fetchval(self._due_sql)
        return wait

    async def pending(self) -> int:
        async with self._pool.acquire() as conn:
            count: int = await conn.fetchval(self._pending_sql)
        return count
