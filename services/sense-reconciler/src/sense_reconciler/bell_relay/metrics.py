"""Prometheus metrics of the Bell relay; every label is a fixed enum."""

from __future__ import annotations

import enum

from prometheus_client import CollectorRegistry

from sense_reconciler.bell_relay.outcome import BatchErrorCode
from yovision_platform.metrics import labeled_counter

__all__ = ["BellRelayMetrics", "ItemFate"]


class ItemFate(enum.StrEnum):
    DELIVERED = "delivered"
    DEAD_LETTERED = "dead_lettered"


class BellRelayMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.items = labeled_counter(
            registry, "sense_bell_relay_items", "Outbox facts settled by Bell's answer", {"fate": ItemFate}
        )
        self.items.initialize_all()
        self.batch_failures = labeled_counter(
            registry,
            "sense_bell_relay_batch_failures",
            "Batches retried as a whole",
            {"reason": BatchErrorCode},
        )
        self.batch_failures.initialize_all()
        self.lease_lost = labeled_counter(
            registry, "sense_bell_relay_lease_lost", "Rounds whose acknowledgement was fenced off", {}
        )
