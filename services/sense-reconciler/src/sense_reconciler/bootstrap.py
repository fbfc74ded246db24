"""Composition root of sense-reconciler: its dependencies in, its use cases out.

`entrypoints/main.py` builds the real adapters (PostgreSQL units of work, the MediaMTX fleet, Bell's client)
and calls `bootstrap`; tests and benches call it with fakes (`adapters/memory.py`). Nothing else constructs
the use cases.
"""

from __future__ import annotations

from dataclasses import dataclass

from sense_reconciler.domain.audit_push import AuditPushConfig
from sense_reconciler.service_layer.audit_pusher import AuditPusher
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.metrics import AuditPushMetrics, ReconcileMetrics
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.ports import AuditPushStore, BellPort, MediaServerFleet, UnitOfWorkFactory
from sense_reconciler.service_layer.reconciler import Reconciler
from sense_reconciler.service_layer.sites import Sites
from sense_reconciler.service_layer.source_uris import SourceUris
from sense_reconciler.settings import SenseReconcilerSettings
from yovision_platform.errors import ConfigError
from yovision_platform.messaging import AvroSerde, catalog_for

DEVICE_EVENT_TYPE = "DeviceRegistered"  # names the device topic (every device event shares it)


@dataclass(frozen=True)
class SenseUseCases:
    """The use cases of one process. `reconciler` is None when `SENSE_RECONCILER_ENABLED=false` (no fleet
    given); `audit_pusher` is None unless the audit push is configured."""

    devices: Devices
    sites: Sites
    reconciler: Reconciler | None = None
    audit_pusher: AuditPusher | None = None


@dataclass(frozen=True)
class AuditPushPorts:
    """What the audit push needs besides its settings: its cursor store and Bell."""

    store: AuditPushStore
    bell: BellPort
    metrics: AuditPushMetrics | None = None


def device_topic(settings: SenseReconcilerSettings, serde: AvroSerde) -> str:
    """The logical device topic: the setting, else the catalogue's topic of the device events."""
    return settings.device_topic or catalog_for(serde).topic_of(DEVICE_EVENT_TYPE)


def device_topic_partitions(settings: SenseReconcilerSettings, serde: AvroSerde) -> int:
    """The setting, else the partition count the event catalogue declares for the device topic."""
    if settings.device_topic_partitions:
        return settings.device_topic_partitions
    topic = catalog_for(serde).topics.get(device_topic(settings, serde))
    if topic is None:
        raise ConfigError(
            settings.env_var_name("device_topic_partitions"), "missing", "topic not in catalogue"
        )
    return topic.partitions


def bootstrap(
    settings: SenseReconcilerSettings,
    *,
    units: UnitOfWorkFactory,
    serde: AvroSerde,
    sources: SourceUris,
    owned: OwnedPartitions,
    fleet: MediaServerFleet | None = None,
    reconcile_metrics: ReconcileMetrics | None = None,
    audit_push: AuditPushPorts | None = None,
    audit_push_config: AuditPushConfig | None = None,
) -> SenseUseCases:
    """The use cases on the given ports. The reconciler exists when `fleet` is given (with its metrics), the
    audit pusher when `audit_push` is (its config: `audit_push_config`, else the settings')."""
    devices = Devices(
        units,
        serde,
        device_topic=device_topic(settings, serde),
        partitions=device_topic_partitions(settings, serde),
        sources=sources,
        media_servers=settings.media_server_ids,
        default_media_server=settings.default_media_server,
        wake_reconciler=owned.wake_for,
    )
    reconciler = None
    if fleet is not None:
        if reconcile_metrics is None:
            raise ValueError("a reconciler needs its metrics")
        reconciler = Reconciler(
            units,
            fleet,
            owned,
            reconcile_metrics,
            serde,
            owner=settings.instance_id,
            sources=sources,
            lease_seconds=settings.lease_seconds,
            batch=settings.claim_batch,
            scan_interval_seconds=settings.scan_interval_seconds,
            drift_check_seconds=settings.drift_check_seconds,
        )
    pusher = None
    config = audit_push_config or settings.audit_push
    if audit_push is not None and config is not None:
        pusher = AuditPusher(audit_push.store, audit_push.bell, config, metrics=audit_push.metrics)
    return SenseUseCases(devices=devices, sites=devices.sites, reconciler=reconciler, audit_pusher=pusher)
