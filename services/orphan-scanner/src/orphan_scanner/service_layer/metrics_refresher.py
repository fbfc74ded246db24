"""Keeps the DB-derived metrics (last report's counts, apply totals) and the projection's lag behind Kafka
current in the service process (one refresh; entrypoints/metrics_refresher_worker.py repeats it)."""

from __future__ import annotations

from orphan_scanner.service_layer.metrics import OrphanMetrics
from orphan_scanner.service_layer.ports import ProjectionProgress, UnitOfWorkFactory


class MetricsRefresher:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        metrics: OrphanMetrics,
        progress: ProjectionProgress | None = None,
    ) -> None:
        self._uow = uow
        self._metrics = metrics
        self._progress = progress

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
