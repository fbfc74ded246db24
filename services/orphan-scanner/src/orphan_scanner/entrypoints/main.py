"""Production wiring of orphan-scanner: `orphan-scanner serve | migrate | check-config`, and `build`, which
builds the real adapters and calls `bootstrap` for `serve` and the `sense-orphan` CLI alike.

`serve` runs the projection consumer, the periodic read-only scanner, the metrics refresher and (from the
platform shell) the outbox relay. Deletion happens only through `sense-orphan apply` (entrypoints.cli).
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import asyncpg
from prometheus_client import CollectorRegistry

from orphan_scanner.adapters.apply_lock import PostgresApplyLock
from orphan_scanner.adapters.projection_progress import KafkaProjectionProgress
from orphan_scanner.adapters.report_reader import PostgresReportReader
from orphan_scanner.adapters.unit_of_work import PostgresOrphanUnitOfWork
from orphan_scanner.bootstrap import OrphanUseCases, bootstrap
from orphan_scanner.entrypoints.api import SERVICE_NAME, mount_api
from orphan_scanner.entrypoints.metrics_refresher_worker import metrics_refresher_worker
from orphan_scanner.entrypoints.projection_consumer import projection_consumer
from orphan_scanner.entrypoints.scanner_worker import scanner_worker
from orphan_scanner.service_layer.events import OrphanEvents
from orphan_scanner.service_layer.metrics import OrphanMetrics
from orphan_scanner.service_layer.ports import PathFleet, ProjectionProgress, UnitOfWorkFactory
from orphan_scanner.settings import OrphanScannerSettings
from yovision_platform.mediamtx import MediaFleet, MediaMtxApi
from yovision_platform.messaging import AvroSerde, ConsumerMetrics, SchemaRegistry
from yovision_platform.storage import Identifier
from yovision_platform.web import ServiceContext, ServiceSpec, use_access_tokens
from yovision_platform.web import main as run


@dataclass(frozen=True)
class Components:
    """The adapters `build` made (the fleet is the caller's to close) and the use cases on them."""

    uow: UnitOfWorkFactory
    serde: AvroSerde
    fleet: PathFleet
    progress: ProjectionProgress
    use_cases: OrphanUseCases


def media_fleet(settings: OrphanScannerSettings) -> MediaFleet[MediaMtxApi]:
    """One client per registered MediaMTX server, each with its own credentials."""
    deadline = settings.mediamtx_deadline_seconds
    return MediaFleet(
        {
            server.id: MediaMtxApi(server.api_url, deadline_seconds=deadline, credentials=server.credentials)
            for server in settings.media_server_list
        }
    )


def build(
    pool: asyncpg.Pool,
    schema: Identifier,
    settings: OrphanScannerSettings,
    *,
    client_id: str,
    metrics: OrphanMetrics | None = None,
    fleet: PathFleet | None = None,
) -> Components:
    """The use cases on PostgreSQL, Kafka and MediaMTX (`fleet`: the registered servers unless given);
    without `metrics`, on a registry of their own (the CLI exports none)."""
    serde = AvroSerde(SchemaRegistry.load())
    paths = media_fleet(settings) if fleet is None else fleet
    uow = functools.partial(PostgresOrphanUnitOfWork, pool, schema)
    progress = KafkaProjectionProgress(
        pool,
        schema,
        kafka=settings.kafka,
        topics=settings.projection_topics,
        consumer_group=settings.projection_group,
        client_id=client_id,
    )
    use_cases = bootstrap(
        settings,
        uow=uow,
        apply_lock=PostgresApplyLock(pool, schema),
        fleet=paths,
        progress=progress,
        report_reader=PostgresReportReader(pool, schema),
        events=OrphanEvents(serde),
        metrics=OrphanMetrics(CollectorRegistry(), settings.media_server_ids) if metrics is None else metrics,
    )
    return Components(uow, serde, paths, progress, use_cases)


async def configure(ctx: ServiceContext[OrphanScannerSettings]) -> None:
    settings = ctx.settings
    client_id = f"{ctx.spec.name}-{settings.instance_id}"
    metrics = OrphanMetrics(ctx.registry, settings.media_server_ids)
    components = build(ctx.pool, ctx.plan.schema, settings, client_id=client_id, metrics=metrics)
    use_cases = components.use_cases
    if settings.projection_enabled:
        consumer = projection_consumer(
            ctx.pool,
            ctx.plan.schema,
            components.serde,
            use_cases.projector,
            consumer_group=settings.projection_group,
            metrics=ConsumerMetrics(ctx.registry),
        )
        ctx.add_worker(
            "projection-consumer",
            functools.partial(
                consumer.consume_topics, settings.kafka, settings.projection_topics, client_id=client_id
            ),
        )
        ctx.add_processed_events_pruner(
            consumer_group=settings.projection_group, topics=settings.projection_topics
        )
    if settings.scan_enabled:
        ctx.add_worker("scanner", scanner_worker(use_cases.scanner))
    ctx.add_worker(
        "metrics-refresher",
        metrics_refresher_worker(use_cases.metrics_refresher, settings.metrics_refresh_seconds),
    )
    use_access_tokens(ctx)
    mount_api(ctx.app, use_cases=use_cases)


SPEC = ServiceSpec.for_package(
    SERVICE_NAME,
    package="orphan_scanner",
    schema="orphan",
    settings_cls=OrphanScannerSettings,
    configure=configure,
)


def main() -> None:
    sys.exit(run(SPEC))
