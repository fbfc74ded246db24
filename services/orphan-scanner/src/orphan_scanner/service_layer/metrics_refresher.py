"""Keeps the DB-derived metrics (last report's counts, apply totals) current in the service process."""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg

from orphan_scanner.adapters.report_store import ReportStore
from orphan_scanner.service_layer.metrics import OrphanMetrics

METRICS_REFRESH_SECONDS = 15.0


class MetricsRefresher:
    def __init__(self, pool: asyncpg.Pool, reports: ReportStore, metrics: OrphanMetrics) -> None:
        self._pool = pool
        self._reports = reports
        self._metrics = metrics

    async def refresh(self) -> None:
        async with self._pool.acquire() as conn:
            totals = await self._reports.totals(conn)
            last = await self._reports.last_complete_counts(conn)
        self._metrics.set_apply_totals(totals)
        if last is not None:
            self._metrics.set_last_scan(last)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.refresh()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), METRICS_REFRESH_SECONDS)
