"""Shard cursors: who relays which shard of an outbox, and how far it got (table ``outbox_cursors``).

One row per (outbox, shard): ``owner``, ``epoch``, ``lease_expires_at`` (database clock), the window
position (``prev_snapshot``, ``cur_snapshot``, ``last_id``; see `yovision_platform.messaging`) and the
shard's retry state (``attempts``, ``next_attempt_at``, ``last_error_code``).

- A relay takes a shard that is free or whose lease expired by bumping ``epoch``; it learns the position in
  the same statement.
- Every later write -- advance, renew, record a failure, release -- is one UPDATE fenced on
  ``owner = me AND epoch = my epoch``. Zero rows updated means another relay took the shard over:
  `CursorFenced`, and the caller must publish nothing more for that shard.
- Relays announce themselves in ``outbox_relay_members`` (a DB-clock expiry renewed with the leases);
  shard *s* belongs to the *i*-th live member (sorted by name) when ``s % members == i``. A relay releases a
  shard that belongs to another member after its current batch, and takes only free or expired shards, so
  two relays never hold one shard at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from yovision_platform.errors import PlatformError
from yovision_platform.messaging._outbox_windows import WindowPosition
from yovision_platform.storage._db import DbConnection, Identifier

__all__ = ["CursorFenced", "ShardCursors", "ShardLease", "assigned_shards"]

# 2**16 s is far above any cap: keeps power() finite whatever the attempt count.
MAX_BACKOFF_EXPONENT = 16
STALE_MEMBER_SECONDS = 3600.0


class CursorFenced(PlatformError):
    code = "cursor_fenced"

    def __init__(self) -> None:
        super().__init__(detail="another relay took the shard over")


@dataclass(frozen=True)
class ShardLease:
    shard: int
    epoch: int
    position: WindowPosition
    attempts: int
    retry_in_seconds: float  # until next_attempt_at, by the database clock (0 when due)
    expires_in_seconds: float


def assigned_shards(members: Sequence[str], owner: str, shards: int) -> set[int]:
    """The shards `owner` should hold when `members` (any order) are the live relays."""
    ordered = sorted(set(members) | {owner})
    index = ordered.index(owner)
    return {s for s in range(shards) if s % len(ordered) == index}


class ShardCursors:
    """Cursor and membership SQL for one outbox (`outbox` = its table name) in `schema`."""

    def __init__(self, schema: Identifier, outbox: str, owner: str, *, lease_seconds: float) -> None:
        self.outbox = outbox
        self.owner = owner
        self.lease_seconds = float(lease_seconds)
        cursors = f"{schema.quoted}.outbox_cursors"
        members = f"{schema.quoted}.outbox_relay_members"
        fence = "outbox = $1 AND shard = $2 AND owner = $3 AND epoch = $4"
        remaining = "greatest(0, extract(epoch FROM {} - now()))::float8"
        lease = "now() + make_interval(secs => $5)"
        self._acquire_sql = f"""
            UPDATE {cursors}
               SET owner = $2, epoch = epoch + 1, lease_expires_at = now() + make_interval(secs => $4)
             WHERE outbox = $1 AND shard = ANY($3::smallint[])
               AND (owner IS NULL OR lease_expires_at <= now())
         RETURNING shard, epoch, prev_snapshot::text AS prev, cur_snapshot::text AS cur, last_id, attempts,
                   {remaining.format("next_attempt_at")} AS retry_in,
                   {remaining.format("lease_expires_at")} AS expires_in
        """
        self._renew_sql = f"""
            UPDATE {cursors} AS c SET lease_expires_at = now() + make_interval(secs => $3)
              FROM unnest($4::smallint[], $5::bigint[]) AS mine(shard, epoch)
             WHERE c.outbox = $1 AND c.owner = $2 AND c.shard = mine.shard AND c.epoch = mine.epoch
         RETURNING c.shard, {remaining.format("c.lease_expires_at")} AS expires_in
        """
        self._advance_sql = f"""
            UPDATE {cursors}
               SET prev_snapshot = $6::text::pg_snapshot, cur_snapshot = $7::text::pg_snapshot, last_id = $8,
                   lease_expires_at = {lease}, attempts = 0, next_attempt_at = now(),
                   last_error_code = NULL, advanced_at = now()
             WHERE {fence}
         RETURNING {remaining.format("lease_expires_at")}
        """
        self._fail_sql = f"""
            UPDATE {cursors}
               SET attempts = attempts + 1, last_error_code = $6, lease_expires_at = {lease},
                   next_attempt_at = now() + make_interval(secs => least(
                       $8::float8, $7::float8 * power(2, least(attempts, {MAX_BACKOFF_EXPONENT})))
                       * (1 - $9::float8 * random()))
             WHERE {fence}
         RETURNING {remaining.format("next_attempt_at")}
        """
        self._release_sql = f"""
            UPDATE {cursors} SET owner = NULL, lease_expires_at = NULL WHERE {fence}
        """
        self._join_sql = f"""
            WITH me AS (
                INSERT INTO {members} (outbox, owner, expires_at)
                VALUES ($1, $2, now() + make_interval(secs => $3))
                ON CONFLICT (outbox, owner) DO UPDATE SET expires_at = excluded.expires_at
            )
            SELECT owner FROM {members} WHERE outbox = $1 AND owner <> $2 AND expires_at > now()
        """
        self._leave_sql = f"DELETE FROM {members} WHERE outbox = $1 AND owner = $2"
        self._forget_sql = f"""
            DELETE FROM {members} WHERE outbox = $1 AND expires_at < now() - make_interval(secs => $2)
        """
        self._count_sql = f"SELECT count(*) FROM {cursors} WHERE outbox = $1"

    async def shard_count(self, conn: DbConnection) -> int:
        count: int = await conn.fetchval(self._count_sql, self.outbox)
        return count

    async def join(self, conn: DbConnection) -> list[str]:
        """Renew this relay's membership; returns every live member, this one included, sorted."""
        others = await conn.fetch(self._join_sql, self.outbox, self.owner, self.lease_seconds)
        await conn.execute(self._forget_sql, self.outbox, STALE_MEMBER_SECONDS)
        return sorted({self.owner, *(r["owner"] for r in others)})

    async def leave(self, conn: DbConnection) -> None:
        await conn.execute(self._leave_sql, self.outbox, self.owner)

    async def acquire(self, conn: DbConnection, shards: Iterable[int]) -> list[ShardLease]:
        """Take those of `shards` that are free or expired; each gets a new epoch."""
        wanted = sorted(shards)
        if not wanted:
            return []
        rows = await conn.fetch(self._acquire_sql, self.outbox, self.owner, wanted, self.lease_seconds)
        return [
            ShardLease(
                shard=r["shard"],
                epoch=r["epoch"],
                position=WindowPosition(r["prev"], r["cur"], r["last_id"]),
                attempts=r["attempts"],
                retry_in_seconds=r["retry_in"],
                expires_in_seconds=r["expires_in"],
            )
            for r in sorted(rows, key=lambda r: r["shard"])
        ]

    async def renew(self, conn: DbConnection, epochs: Mapping[int, int]) -> dict[int, float]:
        """Extend the leases still held (shard -> epoch); returns shard -> seconds left, lost ones absent."""
        if not epochs:
            return {}
        shards = list(epochs)
        rows = await conn.fetch(
            self._renew_sql,
            self.outbox,
            self.owner,
            self.lease_seconds,
            shards,
            [epochs[s] for s in shards],
        )
        return {r["shard"]: r["expires_in"] for r in rows}

    async def advance(self, conn: DbConnection, shard: int, epoch: int, position: WindowPosition) -> float:
        """Store `position` (and renew the lease, clear the retry state); returns the lease's seconds left.
        Raises CursorFenced when the shard is no longer this relay's."""
        left = await conn.fetchval(
            self._advance_sql,
            self.outbox,
            shard,
            self.owner,
            epoch,
            self.lease_seconds,
            position.prev,
            position.cur,
            position.last_id,
        )
        if left is None:
            raise CursorFenced()
        return float(left)

    async def record_failure(
        self,
        conn: DbConnection,
        shard: int,
        epoch: int,
        code: str,
        *,
        base_seconds: float,
        cap_seconds: float,
        jitter: float = 0.0,
    ) -> float:
        """The shard backs off: ``attempts + 1``, ``next_attempt_at = now() + min(cap, base * 2**attempts)``
        (less up to `jitter` of it), ``last_error_code = code``; returns the seconds to wait. The cursor
        itself does not move."""
        wait = await conn.fetchval(
            self._fail_sql,
            self.outbox,
            shard,
            self.owner,
            epoch,
            self.lease_seconds,
            code,
            base_seconds,
            cap_seconds,
            jitter,
        )
        if wait is None:
            raise CursorFenced()
        return float(wait)

    async def release(self, conn: DbConnection, shard: int, epoch: int) -> None:
        """Give the shard up (after its last batch settled); a no-op when it was already taken over."""
        await conn.execute(self._release_sql, self.outbox, shard, self.owner, epoch)
