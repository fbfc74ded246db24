"""Fenced access to `reconcile_state` due rows (lease = owner + random token + DB-clock expiry): the
PostgreSQL adapter of the `ReconcileStore` port, bound to one open transaction.

`claim` takes due rows of the given partitions and one MediaMTX server only (`FOR UPDATE SKIP LOCKED`, so
two instances never claim the same row); `claim_unregistered` takes those of servers no longer registered.
Every later write -- renew, placement changes, complete, fail, refuse, release -- matches device, owner,
token and an unexpired lease in the same statement or transaction, or raises `LeaseLost` and writes nothing.
A refused device (`refuse`) is never due again (`next_attempt_at = 'infinity'`) until a change makes it due.

Placements (`media_path_placements`) record the servers a device's path may be configured on: the renewal
before the first add on a server inserts one, the exact delete there removes it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sense_reconciler.domain import limits
from sense_reconciler.domain.reconcile import ClaimedItem, Convergence, Ownership, WorkItem
from sense_reconciler.domain.records import StoredSource
from yovision_platform.errors import LeaseLost
from yovision_platform.storage import DbConnection, Identifier, Lease, LeaseTable

DUE = "observed_generation < desired_generation AND next_attempt_at <= now() AND partition = ANY($4::int[])"
ON_SERVER = f"{DUE} AND media_server_id = $5"
ON_UNREGISTERED_SERVER = f"{DUE} AND NOT (media_server_id = ANY($5::text[]))"


__all__ = ["PostgresReconcileStore"]


class PostgresReconcileStore:
    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        self._conn = conn
        self._s = schema.quoted
        self._leases = LeaseTable(schema, Identifier("reconcile_state"), Identifier("device_id"))

    async def claim(
        self,
        owner: str,
        partitions: Sequence[int],
        *,
        media_server: str,
        lease_seconds: float,
        limit: int,
    ) -> list[ClaimedItem]:
        """Due rows of `partitions` whose device belongs on `media_server`, oldest due first."""
        return await self._claim(owner, partitions, ON_SERVER, media_server, lease_seconds, limit)

    async def claim_unregistered(
        self,
        owner: str,
        partitions: Sequence[int],
        *,
        registered: Sequence[str],
        lease_seconds: float,
        limit: int,
    ) -> list[ClaimedItem]:
        """Due rows of `partitions` whose server is none of `registered` (removed from the settings)."""
        return await self._claim(
            owner, partitions, ON_UNREGISTERED_SERVER, sorted(registered), lease_seconds, limit
        )

    async def _claim(
        self,
        owner: str,
        partitions: Sequence[int],
        condition: str,
        server: object,
        lease_seconds: float,
        limit: int,
    ) -> list[ClaimedItem]:
        if not 1 <= limit <= limits.CLAIM_BATCH_MAX_ITEMS:
            raise ValueError(f"claim batch must be within 1..{limits.CLAIM_BATCH_MAX_ITEMS}")
        if not partitions:
            return []
        rows = await self._leases.claim(
            self._conn,
            owner,
            lease_seconds=lease_seconds,
            limit=limit,
            due_condition=condition,
            order_by="next_attempt_at, device_id",
            params=[sorted(partitions), server],
            returning=["partition", "attempts", "media_server_id"],
        )
        return [
            ClaimedItem(r.row_id, r.row["partition"], r.row["attempts"], r.row["media_server_id"], r.lease)
            for r in rows
        ]

    async def renew_and_load(self, item: ClaimedItem, *, lease_seconds: float) -> WorkItem:
        """Renew the lease (LeaseLost if it is not ours any more), then read the device under it. For an
        enabled device, record its placement on its server first (before any add there). One statement,
        one round trip: the renewal (the due row's lock first, as every writer takes them), the device,
        the placement insert and the placements (those of before the statement plus the one it inserted:
        a statement does not see its own inserts).

        The generation comes from the statement's snapshot, as the device does, never from the renewal's
        RETURNING: when the renewal waited for a change that held the row, it re-reads the row as that
        change committed it (a newer generation), while the device rows stay those of the snapshot (the
        state before the change). Completing the newer generation with the older state would mark, say, a
        re-enabled device converged after deleting its path."""
        row = await self._conn.fetchrow(
            f"""
            WITH renewed AS (
                UPDATE {self._s}.reconcile_state
                   SET lease_expires_at = now() + make_interval(secs => $4)
                 WHERE device_id = $1 AND lease_owner = $2 AND lease_token = $3 AND lease_expires_at > now()
             RETURNING device_id, lease_expires_at
            ), device AS (
                SELECT d.id, d.tenant_id, d.site_id, d.path_name, d.desired_state, d.media_server_id,
                       d.source_uri, d.source_uri_ciphertext, s.desired_generation, r.lease_expires_at,
                       s.replace_due, s.trace_parent
                  FROM {self._s}.devices d
                  JOIN renewed r ON r.device_id = d.id
                  JOIN {self._s}.reconcile_state s ON s.device_id = d.id
            ), placed AS (
                INSERT INTO {self._s}.media_path_placements (device_id, media_server_id, path_name)
                SELECT id, media_server_id, path_name FROM device WHERE desired_state = 'enabled'
                ON CONFLICT DO NOTHING
             RETURNING media_server_id
            )
            SELECT device.*, EXISTS (SELECT 1 FROM placed) AS placed_now,
                   ARRAY(SELECT media_server_id FROM {self._s}.media_path_placements WHERE device_id = $1
                         UNION SELECT media_server_id FROM placed) AS placements
              FROM device
            """,
            item.device_id,
            item.lease.owner,
            item.lease.token,
            float(lease_seconds),
        )
        if row is None:
            raise LeaseLost()
        ciphertext = row["source_uri_ciphertext"]
        return WorkItem(
            device_id=item.device_id,
            tenant_id=row["tenant_id"],
            site_id=row["site_id"],
            path_name=row["path_name"],
            desired_state=row["desired_state"],
            media_server_id=row["media_server_id"],
            source=StoredSource(None if ciphertext is None else bytes(ciphertext), row["source_uri"]),
            generation=row["desired_generation"],
            lease=Lease(item.lease.owner, item.lease.token, row["lease_expires_at"]),
            placements=frozenset(row["placements"]),
            placed_now=bool(row["placed_now"]),
            replace_due=row["replace_due"],
            trace_parent=row["trace_parent"],
        )

    async def renew(self, item: WorkItem, lease: Lease, *, lease_seconds: float) -> Lease:
        return await self._leases.renew(self._conn, item.device_id, lease, lease_seconds=lease_seconds)

    async def drop_placement(
        self, item: WorkItem, lease: Lease, media_server: str, *, lease_seconds: float
    ) -> Lease:
        """After the exact delete on `media_server` succeeded: forget the placement there (fenced: the lease
        is renewed in the same transaction, LeaseLost otherwise). Returns the renewed lease."""
        renewed = await self._leases.renew(self._conn, item.device_id, lease, lease_seconds=lease_seconds)
        await self._conn.execute(
            f"DELETE FROM {self._s}.media_path_placements WHERE device_id = $1 AND media_server_id = $2",
            item.device_id,
            media_server,
        )
        return renewed

    async def mark_drift_checks(
        self, partitions: Sequence[int], *, older_than_seconds: float, limit: int
    ) -> int:
        """Make converged devices of `partitions` whose last result is older than `older_than_seconds` due
        again (a new desired generation), so MediaMTX is re-verified: a path deleted or changed behind
        Sense's back is repaired. Leased rows are skipped. Returns how many were marked."""
        if not partitions:
            return 0
        status = await self._conn.execute(
            f"""
            UPDATE {self._s}.reconcile_state AS r
               SET desired_generation = r.desired_generation + 1, next_attempt_at = now(), trace_parent = NULL
              FROM (SELECT device_id FROM {self._s}.reconcile_state
                     WHERE partition = ANY($1::int[]) AND status = 'converged'
                       AND observed_generation >= desired_generation
                       AND last_result_at < now() - make_interval(secs => $2)
                       AND (lease_expires_at IS NULL OR lease_expires_at <= now())
                     ORDER BY last_result_at
                     LIMIT $3
                     FOR UPDATE SKIP LOCKED) AS due
             WHERE r.device_id = due.device_id
            """,
            sorted(partitions),
            float(older_than_seconds),
            limit,
        )
        return int(status.split()[-1])

    async def complete(self, item: WorkItem, lease: Lease) -> None:
        """Record `item.generation` as observed; converged unless a newer generation arrived meanwhile."""
        await self._finish(
            item,
            lease,
            """observed_generation = greatest(observed_generation, $4),
                   status = CASE WHEN desired_generation <= $4 THEN 'converged' ELSE 'pending' END,
                   replace_due = replace_due AND desired_generation > $4,
                   attempts = 0, last_error_code = NULL, last_error_reason = NULL, last_result_at = now(),
                   next_attempt_at = now()""",
            item.generation,
        )

    async def fail(
        self, item: ClaimedItem, lease: Lease, *, error_code: str, retry_in_seconds: float
    ) -> None:
        await self._finish(
            item,
            lease,
            """status = 'failed', attempts = attempts + 1, last_error_code = $4, last_error_reason = NULL,
                   last_result_at = now(), next_attempt_at = now() + make_interval(secs => $5)""",
            error_code,
            float(retry_in_seconds),
        )

    async def refuse(self, item: WorkItem, lease: Lease, *, error_code: str, reason: str | None) -> None:
        """Failed for good: not due again until a change; a change made meanwhile (a newer generation than
        `item.generation`) keeps the row due now."""
        await self._finish(
            item,
            lease,
            """status = 'failed', attempts = attempts + 1, last_error_code = $4, last_error_reason = $5,
                   last_result_at = now(),
                   next_attempt_at = CASE WHEN desired_generation <= $6 THEN 'infinity' ELSE now() END""",
            error_code,
            reason,
            item.generation,
        )

    async def _finish(
        self, item: ClaimedItem | WorkItem, lease: Lease, assignments: str, *args: object
    ) -> None:
        """One fenced result: `assignments` (their parameters from $4 on) and the lease cleared, only while
        `lease` still holds the row; else LeaseLost."""
        status = await self._conn.execute(
            f"""
            UPDATE {self._s}.reconcile_state
               SET {assignments},
                   lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
             WHERE device_id = $1 AND lease_owner = $2 AND lease_token = $3 AND lease_expires_at > now()
            """,
            item.device_id,
            lease.owner,
            lease.token,
            *args,
        )
        if status != "UPDATE 1":
            raise LeaseLost()

    async def release(self, item: ClaimedItem) -> None:
        await self._leases.release(self._conn, item.device_id, item.lease)

    async def record_ownership(self, item: WorkItem) -> Ownership:
        row = await self._conn.fetchrow(
            f"""
            INSERT INTO {self._s}.media_path_ownership (device_id, media_server_id, path_name)
            VALUES ($1, $2, $3)
            ON CONFLICT (device_id, media_server_id, path_name) DO UPDATE SET last_seen_at = now()
            RETURNING first_seen_at, last_seen_at
            """,
            item.device_id,
            item.media_server_id,
            item.path_name,
        )
        assert row is not None
        return Ownership(row["first_seen_at"], row["last_seen_at"])

    async def convergence(self, media_server: str) -> Convergence:
        row = await self._conn.fetchrow(
            "SELECT count(*) AS unconverged, "
            "count(*) FILTER (WHERE next_attempt_at = 'infinity') AS refused "
            f"FROM {self._s}.reconcile_state "
            "WHERE observed_generation < desired_generation AND media_server_id = $1",
            media_server,
        )
        assert row is not None
        return Convergence(row["unconverged"], row["refused"])
