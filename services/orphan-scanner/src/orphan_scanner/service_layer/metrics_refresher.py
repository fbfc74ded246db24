"""Keeps the DB-derived metrics (last report's counts, apply totals) and the projection's lag behind Kafka
current in the service process."""

from __future__ import annotations

import asyncio

from orphan_scanner.domain import limits
from orphan_scanner.service_layer.metrics import OrphanMetrics
from orphan_scanner.service_layer.ports import ProjectionProgress, UnitOfWorkFactory
from yovision_platform.backoff import wait_for_stop


class MetricsRefresher:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        metrics: OrphanMetrics,
        progress: ProjectionProgress | None = None,
        *,
        interval_seconds: float = limits.METRICS_REFRESH_SECONDS_DEFAULT,
    ) -> None:
        self._uow = uow
        self._metrics = metrics
        self._progress = progress
        self._interval = interval_seconds

    async def refresh(self) -> None:
        async with self._uow() as uow:
            totals = await uow.reports.totals()
            last = await uow.reports.last_complete_counts()
        self._metrics.set_apply_totals(totals)
        if last is not None:
            self._metrics.set_last_scan(last)
        if self._progress is not None:
            # Unknown while Kafka cannot tell: the gauge keeps its last value (the consumer's own readiness
            # shows the outage).
            lag = await self._progress.lag()
            if lag is not None:
                self._metrics.projection_lag.labels().set(lag)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.refresh()
            await wait_for_stop(stop, self._interval)
