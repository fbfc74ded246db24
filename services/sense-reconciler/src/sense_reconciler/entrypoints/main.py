"""Composition root of sense-reconciler: `sense-reconciler serve | migrate | check-config | rotate-keys`."""

from __future__ import annotations

import sys

from sense_reconciler.adapters.mediamtx import MediaMtxClient
from sense_reconciler.adapters.source_uri_secrets import SourceUriSecrets
from sense_reconciler.adapters.unit_of_work import postgres_units
from sense_reconciler.entrypoints import api
from sense_reconciler.entrypoints.audit_push_worker import WORKER_NAME as AUDIT_PUSH_WORKER
from sense_reconciler.entrypoints.audit_push_worker import audit_push_worker
from sense_reconciler.entrypoints.device_consumer import DeviceEventConsumer
from sense_reconciler.service_layer.devices import DeviceService
from sense_reconciler.service_layer.metrics import AuditPushMetrics, ReconcileMetrics
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.reconciler import Reconciler
from sense_reconciler.service_layer.source_uris import SourceUris
from sense_reconciler.settings import SenseReconcilerSettings
from yovision_platform.access_tokens import use_access_tokens
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.consumer import ConsumerMetrics
from yovision_platform.errors import ConfigError
from yovision_platform.events import catalog_for
from yovision_platform.key_rotation import rotate_keys, rotate_keys_command
from yovision_platform.media_servers import MediaFleet, MediaServer
from yovision_platform.service import ServiceContext, ServiceSpec
from yovision_platform.service import main as run

DEVICE_EVENT_TYPE = "DeviceRegistered"  # names the device topic (every device event shares it)


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


def media_fleet(settings: SenseReconcilerSettings) -> MediaFleet[MediaMtxClient]:
    """One client per registered MediaMTX server, each with its own credentials."""

    def client(server: MediaServer) -> MediaMtxClient:
        return MediaMtxClient(
            server.api_url,
            deadline_seconds=settings.operation_deadline_seconds,
            credentials=server.credentials,
        )

    return MediaFleet.connect(settings.media_server_list, client)


async def configure(ctx: ServiceContext[SenseReconcilerSettings]) -> None:
    settings = ctx.settings
    serde = AvroSerde(SchemaRegistry.load())
    schema = ctx.plan.schema
    units = postgres_units(ctx.pool, schema)
    sources = SourceUris(settings.key_ring)
    kafka = settings.kafka_names
    # The partitions this instance's writers claim (fed by the consumer group): the API wakes them at once
    # for a change of a device they own.
    owned = OwnedPartitions(
        kafka.topic(device_topic(settings, serde)), drain_timeout_seconds=settings.lease_seconds
    )
    service = DeviceService(
        units,
        serde,
        device_topic=device_topic(settings, serde),
        partitions=device_topic_partitions(settings, serde),
        sources=sources,
        media_servers=settings.media_server_ids,
        default_media_server=settings.default_media_server,
        wake_reconciler=owned.wake_for,
    )

    async def encrypt_legacy_source_uris(_: object) -> None:
        """Once per start: encrypt the source URIs stored in cleartext before encryption (migration 0007)."""
        await rotate_keys(ctx.pool, SourceUriSecrets(schema, legacy_only=True), settings.key_ring)

    ctx.add_worker("encrypt-legacy-source-uris", encrypt_legacy_source_uris)
    use_access_tokens(ctx)  # the Control API's access tokens: issuer, JWKS, audience sense-reconciler
    api.install(ctx.app, service)
    if settings.audit_push is not None:
        push = audit_push_worker(
            ctx.pool,
            schema,
            settings.audit_push,
            owner=settings.instance_id,
            metrics=AuditPushMetrics(ctx.registry),
        )
        ctx.add_worker(AUDIT_PUSH_WORKER, push)
    if not settings.reconciler_enabled:
        return
    fleet = media_fleet(settings)
    reconciler = Reconciler(
        units,
        fleet,
        owned,
        ReconcileMetrics(ctx.registry, fleet.ids),
        serde,
        owner=settings.instance_id,
        sources=sources,
        lease_seconds=settings.lease_seconds,
        batch=settings.claim_batch,
        scan_interval_seconds=settings.scan_interval_seconds,
        drift_check_seconds=settings.drift_check_seconds,
    )
    consumer = DeviceEventConsumer(
        ctx.pool,
        schema,
        serde,
        owned,
        kafka=settings.kafka,
        group_id=kafka.group(settings.consumer_group),
        client_id=f"{ctx.spec.name}-{settings.instance_id}",
        metrics=ConsumerMetrics(ctx.registry),
    )
    ctx.add_worker("reconciler", reconciler.run)
    ctx.add_worker("device-consumer", consumer.run)
    ctx.add_processed_events_pruner(consumer_group=kafka.group(settings.consumer_group), topics=[owned.topic])


SPEC = ServiceSpec.for_package(
    "sense-reconciler",
    package="sense_reconciler",
    schema="sense",
    settings_cls=SenseReconcilerSettings,
    configure=configure,
    commands={"rotate-keys": rotate_keys_command(SourceUriSecrets)},
)


def main() -> None:
    sys.exit(run(SPEC))
