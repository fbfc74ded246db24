"""The scan singleton's lease row (`scan_leases`, id `scanner`): the PostgreSQL adapter of
`service_layer.ports.ScanLease` on the platform's fenced `LeaseTable`, bound to one connection. The lease
and the next scan's due time are timed by the database clock."""

from __future__ import annotations

from datetime import datetime, timedelta

from yovision_platform.storage import DbConnection, Identifier, Lease, LeaseTable

SCANNER_LEASE_ID = "scanner"
_ANY = "id = $4"
_DUE = "id = $4 AND next_scan_at <= now()"


class PostgresScanLease:
    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        self._conn = conn
        self._leases = LeaseTable(schema, Identifier("scan_leases"))

    async def claim(self, owner: str, *, lease_seconds: float, due_only: bool) -> Lease | None:
        rows = await self._leases.claim(
            self._conn,
            owner,
            lease_seconds=lease_seconds,
            limit=1,
            due_condition=_DUE if due_only else _ANY,
            params=[SCANNER_LEASE_ID],
        )
        return rows[0].lease if rows else None

    async def release(self, lease: Lease, *, next_scan_in_seconds: float) -> None:
        # First in the report's transaction: the fenced write locks the row until commit, so nobody can take
        # the lease over meanwhile.
        now: datetime = await self._conn.fetchval("SELECT now()")
        await self._leases.fenced_update(
            self._conn,
            SCANNER_LEASE_ID,
            lease,
            {"next_scan_at": now + timedelta(seconds=next_scan_in_seconds)},
            release=True,
        )
