"""SQL of the Bell relay on ``<schema>.device_operation_outbox``: the platform's snapshot-window cursor and
the dead letters.

The outbox is insert-only and read window by window (`yovision_platform.outbox_windows`, one shard: facts
go out in id order, a late-committing fact is never skipped). Its cursor is the row ``(outbox =
'device_operation_outbox', shard = 0)`` of ``outbox_cursors`` (`yovision_platform.shard_cursors`): one
worker holds it at a time, and every write -- advance, back off, renew, release -- is fenced on
(owner, epoch), so a worker whose lease was taken over writes nothing (`CursorFenced`). A rejected fact is
copied to ``device_operation_dead_letters`` with Bell's code in the transaction that moves the cursor past
it. Facts are never deleted or changed.
"""

from __future__ import annotations

from collections.abc import Sequence

from yovision_platform.db import DbConnection, Identifier
from yovision_platform.outbox_windows import OutboxWindows, WindowPosition, WindowReader, unpassed_count_sql
from yovision_platform.shard_cursors import ShardCursors, ShardLease

__all__ = ["FACT_COLUMNS", "OUTBOX_TABLE", "SHARD", "OutboxRepository"]

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


class OutboxRepository:
    def __init__(self, schema: Identifier, owner: str, *, lease_seconds: float) -> None:
        self.cursors = ShardCursors(schema, OUTBOX_TABLE, owner, lease_seconds=lease_seconds)
        s = schema.quoted
        self.windows = OutboxWindows(f"{s}.{OUTBOX_TABLE}", FACT_COLUMNS, sharded=False)
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

    async def acquire(self, conn: DbConnection) -> ShardLease | None:
        """The cursor, when it is free or its lease expired; None while another worker holds it."""
        leases = await self.cursors.acquire(conn, [SHARD])
        return leases[0] if leases else None

    def reader(self, lease: ShardLease, batch_size: int) -> WindowReader:
        return WindowReader(self.windows, SHARD, lease.position, batch_size)

    async def record_results(
        self,
        conn: DbConnection,
        lease: ShardLease,
        position: WindowPosition,
        dead_letters: Sequence[tuple[int, str]],
    ) -> None:
        """Move the cursor to `position` and dead-letter the rejected facts (row id, Bell's code), in one
        transaction; CursorFenced (and nothing written) when another worker holds the cursor now."""
        async with conn.transaction():
            await self.cursors.advance(conn, SHARD, lease.epoch, position)
            if dead_letters:
                await conn.execute(
                    self._dead_letter_sql, [i for i, _ in dead_letters], [code for _, code in dead_letters]
                )

    async def fail_batch(
        self, conn: DbConnection, lease: ShardLease, code: str, *, base_seconds: float, cap_seconds: float
    ) -> float:
        """The cursor stays and backs off: ``attempts + 1``, ``next_attempt_at = now() + min(cap, base *
        2**attempts)`` (1 s, 2 s, 4 s, ... 300 s with the defaults), ``last_error_code = code``. Returns
        the seconds to wait; CursorFenced when the cursor is another worker's."""
        return await self.cursors.record_failure(
            conn, SHARD, lease.epoch, code, base_seconds=base_seconds, cap_seconds=cap_seconds
        )

    async def renew(self, conn: DbConnection, lease: ShardLease) -> bool:
        return SHARD in await self.cursors.renew(conn, {SHARD: lease.epoch})

    async def release(self, conn: DbConnection, lease: ShardLease) -> None:
        await self.cursors.release(conn, SHARD, lease.epoch)

    async def retry_in(self, conn: DbConnection) -> float:
        """Seconds until the cursor's next attempt is due (database clock; 0 when due)."""
        wait: float = await conn.fetchval(self._due_sql)
        return wait

    async def pending(self, conn: DbConnection) -> int:
        """Committed facts the cursor has not passed yet."""
        count: int = await conn.fetchval(self._pending_sql)
        return count
