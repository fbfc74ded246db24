"""The metrics of sense-reconciler: the reconcile loop's and the audit push's. Labels come only from the
enums below and from the operator-registered media server ids (validated at start-up): never device, path,
URI, URL, tenant or site. The audit push's former names (`sense_bell_relay_*`) are exported beside its own
until the next release (docs/migrating.md)."""

from __future__ import annotations

import enum
from collections.abc import Iterable

from prometheus_client import CollectorRegistry

from sense_reconciler.domain.audit_push_outcome import PushFailureCode
from yovision_platform.observability import labeled_counter, labeled_gauge, labeled_histogram

# Items claimed for a server that is no longer registered carry this media_server label value.
UNREGISTERED_SERVER_LABEL = "unregistered"


class ReconcileItemResult(enum.StrEnum):
    CONVERGED = "converged"
    FAILED = "failed"  # retried with backoff
    REFUSED = "refused"  # MediaMTX refused the configuration: retried only after the device changes
    LEASE_LOST = "lease_lost"
    RELEASED = "released"


class RunResult(enum.StrEnum):
    OK = "ok"
    ERROR = "error"


class ReconcileMetrics:
    def __init__(self, registry: CollectorRegistry, media_servers: Iterable[str] = ("default",)) -> None:
        servers = frozenset(media_servers) | {UNREGISTERED_SERVER_LABEL}
        per_server = {"media_server": servers}
        self.runs = labeled_counter(
            registry, "sense_reconcile_runs_total", "Reconcile rounds (claim + items).", {"result": RunResult}
        )
        self.items = labeled_counter(
            registry,
            "sense_reconcile_items_total",
            "Reconciled items by result and MediaMTX server.",
            {"result": ReconcileItemResult, **per_server},
        )
        self.item_seconds = labeled_histogram(
            registry,
            "sense_reconcile_item_seconds",
            "Time per reconciled item.",
            {"result": ReconcileItemResult, **per_server},
        )
        self.unconverged = labeled_gauge(
            registry,
            "sense_reconcile_unconverged",
            "Devices whose desired generation is not observed yet, by MediaMTX server.",
            per_server,
        )
        self.refused = labeled_gauge(
            registry,
            "sense_reconcile_refused",
            "Unconverged devices whose configuration MediaMTX refused (retried only after a change), by "
            "MediaMTX server.",
            per_server,
        )
        self.owned_partitions = labeled_gauge(
            registry, "sense_reconcile_owned_partitions", "Device-topic partitions this instance owns.", {}
        )
        self.runs.initialize_all()
        self.items.initialize_all()
        self.item_seconds.initialize_all()
        self.unconverged.initialize_all()
        self.refused.initialize_all()


class ItemFate(enum.StrEnum):
    DELIVERED = "delivered"
    DEAD_LETTERED = "dead_lettered"


class AuditPushMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.items = labeled_counter(
            registry,
            "sense_audit_push_items",
            "Outbox facts settled by Bell's answer",
            {"fate": ItemFate},
            former_name="sense_bell_relay_items",
        )
        self.items.initialize_all()
        self.batch_failures = labeled_counter(
            registry,
            "sense_audit_push_batch_failures",
            "Batches retried as a whole",
            {"reason": PushFailureCode},
            former_name="sense_bell_relay_batch_failures",
        )
        self.batch_failures.initialize_all()
        self.lease_lost = labeled_counter(
            registry,
            "sense_audit_push_lease_lost",
            "Rounds whose acknowledgement was fenced off",
            {},
            former_name="sense_bell_relay_lease_lost",
        )
