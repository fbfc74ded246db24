"""The read API's use cases: list the reports (newest first, keyset-paged), the newest complete one, one by
its scan id. Read-only."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from orphan_scanner.domain.errors import ReportNotFound
from orphan_scanner.domain.records import ReportPosition, ReportSummary, StoredReport
from orphan_scanner.service_layer.ports import ReportReader


@dataclass(frozen=True)
class ReportListing:
    items: list[ReportSummary]
    # where the next page starts; None on the last page
    next_after: ReportPosition | None


class Reports:
    def __init__(self, reader: ReportReader) -> None:
        self._reader = reader

    async def page(self, limit: int, after: ReportPosition | None) -> ReportListing:
        rows = await self._reader.page(limit + 1, after)
        items = rows[:limit]
        more = len(rows) > limit
        last = items[-1] if items and more else None
        return ReportListing(items, ReportPosition(last.created_at, last.scan_id) if last else None)

    async def latest(self) -> StoredReport:
        """The newest complete report; ReportNotFound before the first one."""
        scan_id = await self._reader.latest_complete()
        if scan_id is None:
            raise ReportNotFound()
        return await self.get(scan_id)

    async def get(self, scan_id: uuid.UUID) -> StoredReport:
        report = await self._reader.load(scan_id)
        if report is None:
            raise ReportNotFound()
        return report
