"""orphan-scanner metrics. Labels come only from the enums below and the operator-registered media server
ids (validated at start-up): never a path, device, tenant, URI or URL.

Scans run in the service process, so their counters are plain counters. Applies run in the `sense-orphan`
CLI process, so the service exports their totals from the database (`apply_runs`, never deleted, so the
totals only grow) and the last usable report's counts, refreshed by `MetricsRefresher`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from yovision_platform.observability import labeled_counter, labeled_gauge, labeled_histogram


class ScanTrigger(enum.StrEnum):
    PERIODIC = "periodic"
    MANUAL = "manual"


class ScanResult(enum.StrEnum):
    COMPLETE = "complete"
    FAILED = "failed"
    LEASE_LOST = "lease_lost"


class ObservedClass(enum.StrEnum):
    OBSERVED = "observed"
    IN_USE = "in_use"
    OWNED_STALE = "owned_stale"
    UNOWNED = "unowned"


class _ApplyTotals(Collector):
    def __init__(self) -> None:
        self.values = {"blocked": 0, "deleted": 0, "failed": 0}

    def collect(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(
            "orphan_apply_blocked",
            "Apply runs refused as a whole (from the database).",
            self.values["blocked"],
        )
        yield CounterMetricFamily(
            "orphan_paths_deleted", "Paths deleted by apply runs (from the database).", self.values["deleted"]
        )
        yield CounterMetricFamily(
            "orphan_path_delete_failures",
            "Failed path deletes of apply runs (from the database).",
            self.values["failed"],
        )


class OrphanMetrics:
    def __init__(self, registry: CollectorRegistry, media_servers: Iterable[str] = ("default",)) -> None:
        self._servers = frozenset(media_servers)
        self.scans = labeled_counter(
            registry,
            "orphan_scans_total",
            "Scans by trigger and result.",
            {"trigger": ScanTrigger, "result": ScanResult},
        )
        self.scan_seconds = labeled_histogram(
            registry, "orphan_scan_seconds", "Duration of scans (enumeration + classification).", {}
        )
        self.last_scan_paths = labeled_gauge(
            registry,
            "orphan_last_scan_paths",
            "Configured MediaMTX paths of the last usable report, by class and MediaMTX server.",
            {"class": ObservedClass, "media_server": self._servers},
        )
        self.projection_lag = labeled_gauge(
            registry,
            "orphan_projection_lag_messages",
            "Sense events published but not yet applied to the ownership projection.",
            {},
        )
        self.scans.initialize_all()
        self.scan_seconds.initialize_all()
        self.last_scan_paths.initialize_all()
        self._totals = _ApplyTotals()
        registry.register(self._totals)

    def set_last_scan(self, counts: Mapping[str, Mapping[str, int]]) -> None:
        """Per server: observed / in_use / owned_stale / unowned. Servers no longer registered are skipped;
        registered servers the report does not name read 0."""
        for server in self._servers:
            tally = counts.get(server, {})
            for cls in ObservedClass:
                self.last_scan_paths.labels(**{"class": cls, "media_server": server}).set(
                    tally.get(cls.value, 0)
                )

    def set_apply_totals(self, totals: dict[str, int]) -> None:
        self._totals.values = {name: int(totals.get(name, 0)) for name in self._totals.values}
