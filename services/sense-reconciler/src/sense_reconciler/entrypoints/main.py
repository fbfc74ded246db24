"""Production wiring of sense-reconciler (the real adapters, then `bootstrap`): `sense-reconciler serve |
migrate | check-config | rotate-keys`."""

from __future__ import annotations

import sys

from sense_reconciler.adapters.audit_push_store import PostgresAuditPushStore
from sense_reconciler.adapters.bell_client import BellClient
from sense_reconciler.adapters.mediamtx import MediaMtxClient
from sense_reconciler.adapters.source_uri_secrets import SourceUriSecrets
from sense_reconciler.adapters.unit_of_work import postgres_units
from sense_reconciler.bootstrap import AuditPushPorts, bootstrap, device_topic
from sense_reconciler.domain.audit_push import AuditPushConfig
from sense_reconciler.entrypoints import api
from sense_reconciler.entrypoints.audit_push_worker import WORKER_NAME as AUDIT_PUSH_WORKER
from sense_reconciler.entrypoints.audit_push_worker import AuditPushWorker
from sense_reconciler.entrypoints.device_consumer import DeviceEventConsumer
from sense_reconciler.entrypoints.reconciler_worker import ReconcilerWorker
from sense_reconciler.service_layer.metrics import AuditPushMetrics, ReconcileMetrics
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.reconciler import Reconciler
from sense_reconciler.service_layer.source_uris import SourceUris
from sense_reconciler.settings import SenseReconcilerSettings
from yovision_platform.mediamtx import MediaFleet, MediaServer
from yovision_platform.messaging import AvroSerde, ConsumerMetrics, SchemaRegistry
from yovision_platform.security import rotate_keys, rotate_keys_command
from yovision_platform.web import ServiceContext, ServiceSpec, use_access_tokens
from yovision_platform.web import main as run


def media_fleet(settings: SenseReconcilerSettings) -> MediaFleet[MediaMtxClient]:
    """One client per registered MediaMTX server, each with its own credentials."""

    def client(server: MediaServer) -> MediaMtxClient:
        return MediaMtxClient(
            server.api_url,
            deadline_seconds=settings.operation_deadline_seconds,
            credentials=server.credentials,
        )

    return MediaFleet.connect(settings.media_server_list, client)


def audit_push_ports(
    ctx: ServiceContext[SenseReconcilerSettings], config: AuditPushConfig, bell: BellClient
) -> AuditPushPorts:
    """The audit push's cursor store on this instance's database, `bell` and the push's metrics."""
    owner, lease = ctx.settings.instance_id, config.lease_seconds
    store = PostgresAuditPushStore(ctx.pool, ctx.plan.schema, owner, lease_seconds=lease)
    return AuditPushPorts(store, bell, AuditPushMetrics(ctx.registry))


def add_reconcile_workers(
    ctx: ServiceContext[SenseReconcilerSettings], reconciler: Reconciler, serde: AvroSerde
) -> None:
    """The `reconciler` worker, the `device-consumer` worker that feeds and wakes it, and the consumer
    group's processed-events pruner."""
    settings = ctx.settings
    group = settings.kafka_names.group(settings.consumer_group)
    consumer = DeviceEventConsumer(
        ctx.pool,
        ctx.plan.schema,
        serde,
        reconciler.owned,
        kafka=settings.kafka,
        group_id=group,
        client_id=f"{ctx.spec.name}-{settings.instance_id}",
        metrics=ConsumerMetrics(ctx.registry),
    )
    ctx.add_worker("reconciler", ReconcilerWorker(reconciler).run)
    ctx.add_worker("device-consumer", consumer.run)
    ctx.add_processed_events_pruner(consumer_group=group, topics=[reconciler.owned.topic])


async def configure(ctx: ServiceContext[SenseReconcilerSettings]) -> None:
    settings = ctx.settings
    serde = AvroSerde(SchemaRegistry.load())
    fleet = media_fleet(settings) if settings.reconciler_enabled else None
    push = settings.audit_push
    bell = BellClient(push) if push is not None else None
    use_cases = bootstrap(
        settings,
        units=postgres_units(ctx.pool, ctx.plan.schema),
        serde=serde,
        sources=SourceUris(settings.key_ring),
        # The partitions this instance's writers claim (fed by the consumer group): the API wakes them at
        # once for a change of a device they own.
        owned=OwnedPartitions(
            settings.kafka_names.topic(device_topic(settings, serde)),
            drain_timeout_seconds=settings.lease_seconds,
        ),
        fleet=fleet,
        reconcile_metrics=ReconcileMetrics(ctx.registry, fleet.ids) if fleet is not None else None,
        audit_push=audit_push_ports(ctx, push, bell) if push is not None and bell is not None else None,
    )

    async def encrypt_legacy_source_uris(_: object) -> None:
        """Once per start: encrypt the source URIs stored in cleartext before encryption (migration 0007)."""
        await rotate_keys(ctx.pool, SourceUriSecrets(ctx.plan.schema, legacy_only=True), settings.key_ring)

    ctx.add_worker("encrypt-legacy-source-uris", encrypt_legacy_source_uris)
    use_access_tokens(ctx)  # the Control API's access tokens: issuer, JWKS, audience sense-reconciler
    api.install(ctx.app, use_cases)
    if use_cases.audit_pusher is not None and bell is not None:
        ctx.add_worker(
            AUDIT_PUSH_WORKER, AuditPushWorker(use_cases.audit_pusher, close_on_stop=bell.aclose).run
        )
    if use_cases.reconciler is not None:
        add_reconcile_workers(ctx, use_cases.reconciler, serde)


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
