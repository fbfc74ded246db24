"""Keeps the DB-derived metrics (last report's counts, apply totals) and the projection's lag behind Kafka
current in the service process."""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from orphan_scanner.adapters.report_store import ReportStore
from orphan_scanner.domain import limits
from orphan_scanner.service_layer.catch_up import KAFKA_UNAVAILABLE, ProjectionCatchUp
from orphan_scanner.service_layer.metrics import OrphanMetrics
from yovision_platform.backoff import wait_for_stop

log = logging.getLogger(__name__)


class MetricsRefresher:
    def __init__(
        self,
        pool: asyncpg.Pool,
        reports: ReportStore,
        metrics: OrphanMetrics,
        catch_up: ProjectionCatchUp | None = None,
        *,
        interval_seconds: float = limits.METRICS_REFRESH_SECONDS_DEFAULT,
    ) -> None:
        self._pool = pool
        self._reports = reports
        self._metrics = metrics
        self._catch_up = catch_up
        self._interval = interval_seconds

    async def refresh(self) -> None:
        async with self._pool.acquire() as conn:
            totals = await self._reports.totals(conn)
            last = await self._reports.last_complete_counts(conn)
        self._metrics.set_apply_totals(totals)
        if last is not None:
            self._metrics.set_last_scan(last)
        if self._catch_up is not None:
            try:
                self._metrics.projection_lag.labels().set(await self._catch_up.lag())
            except KAFKA_UNAVAILABLE as exc:
                # The gauge keeps its last value; a Kafka outage shows in the consumer's own readiness.
                log.warning("projection lag unknown", extra={"error_code": type(exc).__name__})

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.refresh()
            await wait_for_stop(stop, self._interval)
