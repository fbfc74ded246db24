"""Composition root of orphan-scanner: `orphan-scanner serve | migrate | check-config`.

`serve` runs the projection consumer, the periodic read-only scanner, the metrics refresher and (from the
platform shell) the outbox relay. Deletion happens only through `sense-orphan apply` (entrypoints.cli).
"""

from __future__ import annotations

import os
import sys
from typing import Any, cast

from orphan_scanner.entrypoints.http_reports import install_report_routes
from orphan_scanner.entrypoints.projection_consumer import projection_worker
from orphan_scanner.entrypoints.wiring import build
from orphan_scanner.service_layer.metrics import OrphanMetrics
from orphan_scanner.service_layer.metrics_refresher import MetricsRefresher
from orphan_scanner.settings import JWT_AUDIENCE, OrphanScannerSettings
from yovision_platform.auth import TokenVerifier
from yovision_platform.consumer import ConsumerMetrics
from yovision_platform.service import ServiceContext, ServiceSpec
from yovision_platform.service import main as run
from yovision_platform.web import create_app


async def configure(ctx: ServiceContext[OrphanScannerSettings]) -> None:
    settings = ctx.settings
    client_id = f"{ctx.spec.name}-{settings.instance_id}"
    metrics = OrphanMetrics(ctx.registry, settings.media_server_ids)
    components = build(ctx.pool, ctx.plan.schema, settings, client_id=client_id, metrics=metrics)
    if settings.projection_enabled:
        ctx.add_worker(
            "projection-consumer",
            projection_worker(
                ctx.pool,
                ctx.plan.schema,
                components.serde,
                kafka=settings.kafka,
                topics=settings.projection_topics,
                consumer_group=settings.projection_group,
                client_id=client_id,
                consumer_metrics=ConsumerMetrics(ctx.registry),
            ),
        )
        ctx.add_processed_events_pruner(
            consumer_group=settings.projection_group, topics=settings.projection_topics
        )
    if settings.scan_enabled:
        ctx.add_worker("scanner", components.scanner.run)
    refresher = MetricsRefresher(
        ctx.pool,
        components.reports,
        metrics,
        components.catch_up if settings.projection_enabled else None,
        interval_seconds=settings.metrics_refresh_seconds,
    )
    ctx.add_worker("metrics-refresher", refresher.run)
    if settings.token_verifier is not None:
        install_report_routes(
            ctx.app, pool=ctx.pool, schema=ctx.plan.schema, verifier=settings.token_verifier
        )


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
    """The read API's document (schemas/openapi/orphan-scanner.v1.json); builds routes, calls none."""

    app = create_app("orphan-scanner", version)
    verifier = TokenVerifier(os.urandom(32), issuer="openapi", audience=JWT_AUDIENCE)
    install_report_routes(app, pool=cast(Any, None), schema="orphan", verifier=verifier)
    return app.openapi()
