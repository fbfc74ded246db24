"""SQL listing scan reports for the read API: newest first, keyset-paged by (created_at, id)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from yovision_platform.db import DbConnection, Identifier


@dataclass(frozen=True)
class ReportSummary:
    scan_id: uuid.UUID
    trigger: str
    status: str
    error_code: str | None
    created_at: datetime
    expires_at: datetime
    observed_total: int | None
    owned_stale_count: int | None
    unowned_count: int | None


@dataclass(frozen=True)
class ReportPosition:
    created_at: datetime
    scan_id: uuid.UUID


class ReportReader:
    def __init__(self, schema: Identifier) -> None:
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

    async def page(self, conn: DbConnection, limit: int, after: ReportPosition | None) -> list[ReportSummary]:
        if after is None:
            records = await conn.fetch(self._first, limit)
        else:
            records = await conn.fetch(self._next, limit, after.created_at, after.scan_id)
        return [ReportSummary(**dict(r)) for r in records]

    async def latest_complete(self, conn: DbConnection) -> uuid.UUID | None:
        scan_id: uuid.UUID | None = await conn.fetchval(self._latest_complete)
        return scan_id
