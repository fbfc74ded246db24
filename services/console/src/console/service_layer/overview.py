"""The overview: readiness and the health figures of every service, from its ``/readyz`` and ``/metrics``.

Figures read (platform metrics every service exports): ``outbox_relay_backlog`` (unpublished outbox rows),
``consumer_lag_messages`` (messages on its partitions not yet applied) and ``consumer_dead_letters`` (its
consumer group's dead letters). Each service has at most one consumer group, so "per group" is "per
service". A figure a service does not export is shown as absent, never as 0.

With a Prometheus configured, the overview also lists its firing and pending alerts; a Prometheus that does
not answer, or answers anything but an alerts list, is shown as unreachable.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from console.domain.alerts import Alert, AlertState
from console.service_layer.ports import AlertsPort, HealthPort

FIGURES = ("outbox_relay_backlog", "consumer_lag_messages", "consumer_dead_letters")
SERVICES = ("sense-reconciler", "orphan-scanner", "bell-receiver", "signal-watcher", "media-worker")


@dataclass(frozen=True)
class ServiceHealth:
    name: str
    reachable: bool
    ready: bool
    checks: dict[str, str] = field(default_factory=dict)
    figures: dict[str, float | None] = field(default_factory=dict)

    @property
    def trouble(self) -> bool:
        """Not ready, or any figure above zero: what the operator must look at."""
        return not self.ready or any(value for value in self.figures.values())


def figures_of(page: str) -> dict[str, float | None]:
    found: dict[str, float | None] = dict.fromkeys(FIGURES)
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            if sample.name in found and not sample.labels:
                found[sample.name] = float(sample.value)
    return found


async def health_of(health: HealthPort, name: str) -> ServiceHealth:
    readiness, page = await asyncio.gather(health.readiness(name), health.metrics(name))
    if readiness is None:
        return ServiceHealth(name, reachable=False, ready=False, figures=dict.fromkeys(FIGURES))
    figures = figures_of(page) if page is not None else dict.fromkeys(FIGURES)
    return ServiceHealth(name, True, readiness.status == 200, dict(readiness.checks), figures)


@dataclass(frozen=True)
class Alerts:
    """What Prometheus reported: `reachable` False when it did not answer with an alerts list."""

    reachable: bool
    alerts: tuple[Alert, ...] = ()

    @property
    def firing(self) -> list[Alert]:
        return [alert for alert in self.alerts if alert.state is AlertState.FIRING]

    @property
    def pending(self) -> list[Alert]:
        return [alert for alert in self.alerts if alert.state is AlertState.PENDING]


async def alerts(prometheus: AlertsPort | None) -> Alerts | None:
    """Prometheus's alerts; None when the console has no Prometheus configured."""
    if prometheus is None:
        return None
    found = await prometheus.alerts()
    return Alerts(reachable=False) if found is None else Alerts(reachable=True, alerts=tuple(found))


@dataclass(frozen=True)
class Overview:
    """The overview's use case: every service's health, and the alerts when a Prometheus is configured."""

    health: HealthPort
    prometheus: AlertsPort | None = None

    async def service(self, name: str) -> ServiceHealth:
        return await health_of(self.health, name)

    async def everything(self) -> tuple[list[ServiceHealth], Alerts | None]:
        healths, found = await asyncio.gather(
            asyncio.gather(*(health_of(self.health, name) for name in SERVICES)), alerts(self.prometheus)
        )
        return list(healths), found
