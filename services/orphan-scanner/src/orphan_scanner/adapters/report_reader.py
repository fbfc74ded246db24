"""SQL listing scan reports for the read API: newest first, keyset-paged by (created_at, id). The PostgreSQL
adapter of `service_layer.ports.ReportReader` (each read on a pooled connection of its own)."""

from __future__ import annotations

import uuid

import asyncpg

from orphan_scanner.adapters.report_store import load_report
from orphan_scanner.domain.records import ReportPosition, ReportSummary, StoredReport
from yovision_platform.storage import Identifier


class PostgresReportReader:
    def __init__(self, pool: asyncpg.Pool, schema: Identifier) -> None:
        self._pool = pool
        self._schema = schema
        s = schema.quoted
        columns = (
            "id AS scan_id, trigger, status, error_code, created_at, expires_at, observed_total, "
            "owned_stale_count, unowned_count"
        )
        self._first = f"SELECT {columns} FROM {s}.scan_reports ORDER BY created_at DESC, id DESC LIMIT $1"
        self._next = (
            f"SELECT {columns} FROM {s}.scan_reports WHERE (created_at, id) < ($2, $3) "
            "ORDER BY created_at DESC, id DESC LIMIT $1"
        )
        newest = "ORDER BY created_at DESC, id DESC LIMIT 1"
        self._latest_complete = f"SELECT id FROM {s}.scan_reports WHERE status = 'complete' {newest}"

    async def page(self, limit: int, after: ReportPosition | None) -> list[ReportSummary]:
        async with self._pool.acquire() as conn:
            if after is None:
                records = await conn.fetch(self._first, limit)
            else:
                records = await conn.fetch(self._next, limit, after.created_at, after.scan_id)
        return [ReportSummary(**dict(r)) for r in records]

    async def latest_complete(self) -> uuid.UUID | None:
        async with self._pool.acquire() as conn:
            scan_id: uuid.UUID | None = await conn.fetchval(self._latest_complete)
        return scan_id

    async def load(self, scan_id: uuid.UUID) -> StoredReport | None:
        async with self._pool.acquire() as conn:
            return await load_report(conn, self._schema, scan_id)
