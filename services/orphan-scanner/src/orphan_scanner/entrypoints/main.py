"""Composition root of orphan-scanner: `orphan-scanner serve | migrate | check-config`, and `build`, which
wires the use cases to their adapters for `serve` and the `sense-orphan` CLI alike.

`serve` runs the projection consumer, the periodic read-only scanner, the metrics refresher and (from the
platform shell) the outbox relay. Deletion happens only through `sense-orphan apply` (entrypoints.cli).
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any, cast

import asyncpg

from orphan_scanner.adapters.apply_lock import PostgresApplyLock
from orphan_scanner.adapters.projection_progress import KafkaProjectionProgress
from orphan_scanner.adapters.report_reader import PostgresReportReader
from orphan_scanner.adapters.unit_of_work import PostgresOrphanUnitOfWork
from orphan_scanner.entrypoints.http_reports import install_report_routes
from orphan_scanner.entrypoints.projection_consumer import projection_consumer
from orphan_scanner.service_layer.apply import ApplyService
from orphan_scanner.service_layer.events import OrphanEvents
from orphan_scanner.service_layer.metrics import OrphanMetrics
from orphan_scanner.service_layer.metrics_refresher import MetricsRefresher
from orphan_scanner.service_layer.ports import MediaServers, ProjectionProgress, UnitOfWorkFactory
from orphan_scanner.service_layer.reports import ReportQueries
from orphan_scanner.service_layer.scanner import Scanner
from orphan_scanner.settings import OrphanScannerSettings
from yovision_platform.access_tokens import use_access_tokens
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.consumer import ConsumerMetrics
from yovision_platform.db import Identifier
from yovision_platform.media_servers import MediaFleet
from yovision_platform.mediamtx import MediaMtxApi
from yovision_platform.service import ServiceContext, ServiceSpec
from yovision_platform.service import main as run
from yovision_platform.web import create_app


@dataclass(frozen=True)
class Components:
    uow: UnitOfWorkFactory
    serde: AvroSerde
    mediamtx: MediaServers
    scanner: Scanner
    progress: ProjectionProgress
    apply: ApplyService


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
    mediamtx: MediaServers | None = None,
) -> Components:
    serde = AvroSerde(SchemaRegistry.load())
    events = OrphanEvents(serde)
    fleet = media_fleet(settings) if mediamtx is None else mediamtx
    uow = functools.partial(PostgresOrphanUnitOfWork, pool, schema)
    scanner = Scanner(
        uow,
        events,
        fleet,
        metrics,
        owner=settings.instance_id,
        lease_seconds=settings.scan_lease_seconds,
        interval_seconds=settings.scan_interval_seconds,
        retention_hours=settings.report_retention_hours,
    )
    progress = KafkaProjectionProgress(
        pool,
        schema,
        kafka=settings.kafka,
        topics=settings.projection_topics,
        consumer_group=settings.projection_group,
        client_id=client_id,
    )
    apply = ApplyService(
        uow,
        PostgresApplyLock(pool, schema),
        events,
        fleet,
        progress,
        instance_id=settings.instance_id,
        catch_up_timeout_seconds=settings.catch_up_timeout_seconds,
    )
    return Components(uow, serde, fleet, scanner, progress, apply)


async def configure(ctx: ServiceContext[OrphanScannerSettings]) -> None:
    settings = ctx.settings
    client_id = f"{ctx.spec.name}-{settings.instance_id}"
    metrics = OrphanMetrics(ctx.registry, settings.media_server_ids)
    components = build(ctx.pool, ctx.plan.schema, settings, client_id=client_id, metrics=metrics)
    if settings.projection_enabled:
        consumer = projection_consumer(
            ctx.pool,
            ctx.plan.schema,
            components.serde,
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
        ctx.add_worker("scanner", components.scanner.run)
    refresher = MetricsRefresher(
        components.uow,
        metrics,
        components.progress if settings.projection_enabled else None,
        interval_seconds=settings.metrics_refresh_seconds,
    )
    ctx.add_worker("metrics-refresher", refresher.run)
    use_access_tokens(ctx)
    install_report_routes(ctx.app, reports=ReportQueries(PostgresReportReader(ctx.pool, ctx.plan.schema)))


SPEC = ServiceSpec.for_package(
    "orphan-scanner",
    package="orphan_scanner",
    schema="orphan",
    settings_cls=OrphanScannerSettings,
    configure=configure,
)


def main() -> None:
    sys.exit(run(SPEC))


def openapi_document(version: str) -> dict[str, object]:
    """The read API's document (schemas/openapi/orphan-scanner.v1.json); builds routes, calls none (so no
    verifier, no issuer and no reader are needed)."""

    app = create_app("orphan-scanner", version)
    install_report_routes(app, reports=ReportQueries(cast(Any, None)))
    return app.openapi()
