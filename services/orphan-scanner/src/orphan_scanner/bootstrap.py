"""Composition root of orphan-scanner's use cases: settings and ports in, `OrphanUseCases` out.

Production (`entrypoints/main.py`: the service and the `sense-orphan` CLI) passes the PostgreSQL, Kafka
and MediaMTX adapters; the unit tests and benches pass the fakes (`adapters/memory.py`). Nothing else
constructs a use case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from orphan_scanner.service_layer.apply import Applier
from orphan_scanner.service_layer.events import OrphanEvents
from orphan_scanner.service_layer.metrics import OrphanMetrics
from orphan_scanner.service_layer.metrics_refresher import MetricsRefresher
from orphan_scanner.service_layer.ports import (
    ApplyLock,
    PathFleet,
    ProjectionProgress,
    ReportReader,
    UnitOfWorkFactory,
)
from orphan_scanner.service_layer.projection import OwnershipProjector
from orphan_scanner.service_layer.reports import Reports
from orphan_scanner.service_layer.scanner import Scanner


class UseCaseSettings(Protocol):
    """The settings the use cases read (`OrphanScannerSettings` in production)."""

    @property
    def instance_id(self) -> str: ...

    @property
    def scan_lease_seconds(self) -> float: ...

    @property
    def scan_interval_seconds(self) -> float: ...

    @property
    def report_retention_hours(self) -> int: ...

    @property
    def catch_up_timeout_seconds(self) -> float: ...

    @property
    def projection_enabled(self) -> bool: ...


@dataclass(frozen=True)
class OrphanUseCases:
    """What the routes, the workers, the consumer and the CLI call."""

    scanner: Scanner
    applier: Applier
    reports: Reports
    projector: OwnershipProjector
    metrics_refresher: MetricsRefresher


def bootstrap(
    settings: UseCaseSettings,
    *,
    uow: UnitOfWorkFactory,
    apply_lock: ApplyLock,
    fleet: PathFleet,
    progress: ProjectionProgress,
    report_reader: ReportReader,
    events: OrphanEvents,
    metrics: OrphanMetrics,
) -> OrphanUseCases:
    """orphan-scanner's use cases on these ports. The projector takes the consumer's own unit of work per
    event (it joins the consumer's transaction), so it holds no factory."""
    return OrphanUseCases(
        scanner=Scanner(
            uow,
            events,
            fleet,
            metrics,
            owner=settings.instance_id,
            lease_seconds=settings.scan_lease_seconds,
            interval_seconds=settings.scan_interval_seconds,
            retention_hours=settings.report_retention_hours,
        ),
        applier=Applier(
            uow,
            apply_lock,
            events,
            fleet,
            progress,
            instance_id=settings.instance_id,
            catch_up_timeout_seconds=settings.catch_up_timeout_seconds,
        ),
        reports=Reports(report_reader),
        projector=OwnershipProjector(),
        metrics_refresher=MetricsRefresher(uow, metrics, progress if settings.projection_enabled else None),
    )
