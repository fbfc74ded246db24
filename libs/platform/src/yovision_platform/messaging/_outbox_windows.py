"""Snapshot windows over an insert-only outbox (the PgQ design, see pgq's ``batch_event_sql``).

Every outbox row stores the id of the transaction that wrote it (``xid``, a ``xid8``). A relay keeps, per
shard, a position ``(prev, cur, last_id)`` made of two ``pg_snapshot`` values and an id:

- every row whose transaction is visible in ``prev`` is published;
- the *window* is the rows visible in ``cur`` but not in ``prev``; of those, the ones with ``id <= last_id``
  are published, the rest are not, and they are published in id order.

Visibility only grows from one snapshot to a later one, so every committed row falls in exactly one window,
whenever it commits: a transaction that commits late lands in the window open at its commit, and one still
running holds back only its own rows (it is simply not visible yet). Within a window rows go out in id
order, and rows of one key are written in commit order (the writers' per-key lock), so a key is never
reordered -- which a plain ``xid < xmin`` cursor cannot promise (a transaction can get its xid before
waiting for the key lock held by an older one).

The window query finds its rows through an index on ``(shard, xid)``: a range scan for transactions newer
than ``prev``'s ``xmax`` and exact lookups for those that were running when ``prev`` was taken, so a long
transaction elsewhere does not make every window rescan what it spans. A window that holds more than a batch
(a backlog) has its ids listed once, sorted, and is then read by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg

from yovision_platform.storage._db import DbConnection, Identifier

__all__ = ["OutboxWindows", "WindowBatch", "WindowPosition", "WindowReader", "unpassed_count_sql"]


@dataclass(frozen=True)
class WindowPosition:
    """Where a shard's cursor stands; snapshots as ``pg_snapshot`` text."""

    prev: str
    cur: str
    last_id: int = 0

    @property
    def window_done(self) -> bool:
        """True when the window (prev, cur] holds nothing unpublished: the next read takes a new snapshot."""
        return self.prev == self.cur

    def exhausted(self) -> WindowPosition:
        return WindowPosition(self.cur, self.cur, 0)


@dataclass(frozen=True)
class WindowBatch:
    """Rows to publish, in id order, with the position before and after them."""

    rows: Sequence[asyncpg.Record]
    before: WindowPosition
    after: WindowPosition


class OutboxWindows:
    """The SQL of the windows of one outbox table. ``columns`` are returned for every row (``id`` first);
    ``sharded`` tables have a ``shard`` column, the others are one shard (0)."""

    def __init__(self, table: str, columns: Sequence[str], *, sharded: bool = True) -> None:
        select = ", ".join(f"o.{column}" for column in ("id", *columns))
        shard = "o.shard = $1 AND " if sharded else "$1::int IS NOT NULL AND "
        # $1 shard, $2 prev, $3 cur (NULL: take the current snapshot), $4 last_id.
        # The rows of the transactions running at prev are looked up per transaction: a LATERAL subquery
        # fenced with OFFSET 0, so no plan can turn it around. With `o.xid = ANY(...)`, or a plain join, a
        # generic plan (a prepared statement's, after five runs) read every row of the shard and filtered
        # them by xid whenever the table's statistics were older than its rows: O(shard) per read (measured
        # with auto_explain: 10-19 ms reads, most of PostgreSQL's CPU under the paced load). The lookup is an
        # index scan only while the planner knows xid is nearly unique: platform migration 0005 declares it
        # (a young table's sample, or one bulk transaction's, had it read the table per running transaction).
        in_window = f"""
            SELECT {{select}}
              FROM unnest(ARRAY(SELECT x FROM pg_snapshot_xip(w.prev) AS x
                                 WHERE pg_visible_in_snapshot(x, w.cur))) AS running(xid),
                   LATERAL (SELECT * FROM {table} o
                             WHERE {shard}o.xid = running.xid AND o.id > $4 OFFSET 0) AS o
            UNION ALL
            SELECT {{select}} FROM {table} o
             WHERE {shard}o.id > $4
               AND o.xid >= pg_snapshot_xmax(w.prev) AND o.xid < pg_snapshot_xmax(w.cur)
               AND pg_visible_in_snapshot(o.xid, w.cur)
        """
        window = (
            "(SELECT $2::text::pg_snapshot AS prev,"
            " coalesce($3::text::pg_snapshot, pg_current_snapshot()) AS cur)"
        )
        self._rows_sql = f"""
            SELECT w.cur::text AS window_cur, r.*
              FROM {window} AS w
              LEFT JOIN LATERAL ({in_window.format(select=select)} ORDER BY 1 LIMIT $5) AS r ON true
        """
        self._ids_sql = f"""
            SELECT coalesce(array_agg(r.id ORDER BY r.id), '{{}}')
              FROM {window} AS w, LATERAL ({in_window.format(select="o.id")}) AS r
        """
        self._by_ids_sql = f"SELECT {select} FROM {table} o WHERE o.id = ANY($1::bigint[]) ORDER BY o.id"

    async def rows(
        self, conn: DbConnection, shard: int, position: WindowPosition, limit: int
    ) -> tuple[str, list[asyncpg.Record]]:
        """The first ``limit`` unpublished rows of the window, and the window's ``cur``. A finished window
        is replaced by (its cur, the current snapshot]."""
        cur = None if position.window_done else position.cur
        records = await conn.fetch(self._rows_sql, shard, position.prev, cur, position.last_id, limit)
        return records[0]["window_cur"], [r for r in records if r["id"] is not None]

    async def ids_after(self, conn: DbConnection, shard: int, position: WindowPosition) -> list[int]:
        """Every unpublished id of the window (position.cur fixed), sorted."""
        ids: list[int] = await conn.fetchval(
            self._ids_sql, shard, position.prev, position.cur, position.last_id
        )
        return ids

    async def by_ids(self, conn: DbConnection, ids: Sequence[int]) -> list[asyncpg.Record]:
        return list(await conn.fetch(self._by_ids_sql, list(ids)))


def unpassed_count_sql(schema: Identifier, table: str, *, sharded: bool = True) -> str:
    """SQL counting the committed rows of `schema.table` not yet past their shard's stored cursor (the
    relay's backlog); no parameters."""
    t = f"{schema.quoted}.{Identifier(table).quoted}"
    shard = "o.shard = c.shard AND " if sharded else ""
    return f"""
        SELECT coalesce(sum(n), 0)::bigint FROM {schema.quoted}.outbox_cursors c, LATERAL (
            SELECT count(*) AS n FROM (
                SELECT o.id, o.xid FROM {t} o
                 WHERE {shard}o.xid = ANY(ARRAY(SELECT pg_snapshot_xip(c.prev_snapshot)))
                UNION ALL
                SELECT o.id, o.xid FROM {t} o
                 WHERE {shard}o.xid >= pg_snapshot_xmax(c.prev_snapshot)
            ) AS unpassed
             WHERE NOT (pg_visible_in_snapshot(unpassed.xid, c.cur_snapshot) AND unpassed.id <= c.last_id)
        ) AS per_shard
         WHERE c.outbox = '{table}'
    """


@dataclass
class WindowReader:
    """Reads one shard batch by batch from a position; keeps the position of what it handed out.

    After a failed publish, `reset` puts it back to the position the cursor still holds.
    """

    windows: OutboxWindows
    shard: int
    position: WindowPosition
    batch_size: int
    _ids: list[int] = field(default_factory=list)

    def reset(self, position: WindowPosition) -> None:
        self.position = position
        self._ids = []

    async def next_batch(self, conn: DbConnection) -> WindowBatch:
        before = self.position
        if self._ids:
            chunk, rest = self._ids[: self.batch_size], self._ids[self.batch_size :]
            rows = await self.windows.by_ids(conn, chunk)
            after = WindowPosition(before.prev, before.cur, chunk[-1]) if rest else before.exhausted()
            self._ids = rest
        else:
            cur, rows = await self.windows.rows(conn, self.shard, before, self.batch_size + 1)
            window = WindowPosition(before.prev, cur, before.last_id)
            if len(rows) > self.batch_size:
                rows = rows[: self.batch_size]
                after = WindowPosition(window.prev, window.cur, rows[-1]["id"])
                # Every later batch of this window reads by id (one sort, not one per batch).
                self._ids = await self.windows.ids_after(conn, self.shard, after)
            else:
                after = window.exhausted()
            if not rows:
                # Nothing in (prev, cur]: cur becomes the new prev without a write (the stored cursor stays
                # valid, only older), and `before` moves with it so a reset keeps the progress.
                before = after
        self.position = after
        return WindowBatch(rows, before, after)
