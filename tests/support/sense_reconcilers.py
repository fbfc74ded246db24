"""Sense's `Reconciler` as the reconciler tests build it, on any unit of work and fleet (the unit tests'
fakes, the integration tests' PostgreSQL and MediaMTX): the production limits, the test's owner, lease and
drift check, the given partitions of `sense.device.v1` owned."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from sense_reconciler.domain import limits
from sense_reconciler.service_layer.metrics import ReconcileMetrics
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.ports import UnitOfWorkFactory
from sense_reconciler.service_layer.reconciler import Reconciler
from sense_reconciler.service_layer.source_uris import SourceUris
from yovision_platform.mediamtx import MediaFleet
from yovision_platform.messaging import AvroSerde

DEVICE_TOPIC = "sense.device.v1"
ALL_PARTITIONS = range(12)


def reconciler_on(
    units: UnitOfWorkFactory,
    fleet: MediaFleet[Any],
    serde: AvroSerde,
    sources: SourceUris,
    *,
    servers: Sequence[str] | None = None,
    owner: str = "inst-a",
    lease_seconds: float = 5.0,
    partitions: range = ALL_PARTITIONS,
    registry: CollectorRegistry | None = None,
    drift_check_seconds: float = 0.0,
) -> Reconciler:
    """`servers`: the media servers the metrics name (the fleet's by default)."""
    owned = OwnedPartitions(DEVICE_TOPIC)
    owned.assign(partitions)
    return Reconciler(
        units,
        fleet,
        owned,
        ReconcileMetrics(registry or CollectorRegistry(), fleet.ids if servers is None else tuple(servers)),
        serde,
        owner=owner,
        sources=sources,
        lease_seconds=lease_seconds,
        batch=limits.CLAIM_BATCH_MAX_ITEMS,
        drift_check_seconds=drift_check_seconds,
    )
