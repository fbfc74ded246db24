"""Reconcile metrics. Labels come only from the enums below: never device, path, URI, tenant or site."""

from __future__ import annotations

import enum

from prometheus_client import CollectorRegistry

from yovision_platform.metrics import labeled_counter, labeled_gauge, labeled_histogram


class ItemResult(enum.StrEnum):
    CONVERGED = "converged"
    FAILED = "failed"
    LEASE_LOST = "lease_lost"
    RELEASED = "released"


class RunResult(enum.StrEnum):
    OK = "ok"
    ERROR = "error"


class ReconcileMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.runs = labeled_counter(
            registry, "sense_reconcile_runs_total", "Reconcile rounds (claim + items).", {"result": RunResult}
        )
        self.items = labeled_counter(
            registry, "sense_reconcile_items_total", "Reconciled items by result.", {"result": ItemResult}
        )
        self.item_seconds = labeled_histogram(
            registry, "sense_reconcile_item_seconds", "Time per reconciled item.", {"result": ItemResult}
        )
        self.unconverged = labeled_gauge(
            registry,
            "sense_reconcile_unconverged",
            "Devices whose desired generation is not observed yet.",
            {},
        )
        self.owned_partitions = labeled_gauge(
            registry, "sense_reconcile_owned_partitions", "Device-topic partitions this instance owns.", {}
        )
        self.runs.initialize_all()
        self.items.initialize_all()
        self.item_seconds.initialize_all()
