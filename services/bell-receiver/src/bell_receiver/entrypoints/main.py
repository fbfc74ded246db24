"""Composition root of bell-receiver: `bell-receiver serve | migrate | check-config`."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from bell_receiver.entrypoints.api import SERVICE_NAME, install_api
from bell_receiver.entrypoints.consumer import ingest_worker
from bell_receiver.entrypoints.receipt_purge import receipt_purge_worker
from bell_receiver.metrics import BellMetrics
from bell_receiver.service_layer.ingest import AUDIT_TOPICS, CONSUMER_GROUP
from bell_receiver.settings import BellReceiverSettings
from yovision_platform.service import ServiceContext, ServiceSpec, migrations_dir_of
from yovision_platform.service import main as run

MIGRATIONS_DIR = migrations_dir_of("bell_receiver")


def build_spec(
    schema: str = "bell", *, topics: Sequence[str] = AUDIT_TOPICS, consumer_group: str = CONSUMER_GROUP
) -> ServiceSpec:
    """The service; tests pass their own schema, topics and consumer group."""

    async def configure(ctx: ServiceContext) -> None:
        settings = ctx.settings
        assert isinstance(settings, BellReceiverSettings)
        metrics = BellMetrics.create(ctx.registry)
        install_api(
            ctx.app,
            pool=ctx.pool,
            schema=ctx.plan.schema,
            keyring=settings.relay_keyring,
            verifier=settings.token_verifier,
            metrics=metrics,
        )
        ctx.add_worker(
            "audit-ingest",
            ingest_worker(
                ctx.pool,
                ctx.plan.schema,
                metrics,
                bootstrap=settings.kafka_bootstrap,
                topics=topics,
                consumer_group=consumer_group,
                client_id=f"{SERVICE_NAME}-{settings.instance_id}",
            ),
        )
        ctx.add_worker("receipt-purge", receipt_purge_worker(ctx.pool, ctx.plan.schema))

    return ServiceSpec.for_package(
        SERVICE_NAME,
        package="bell_receiver",
        schema=schema,
        settings_cls=BellReceiverSettings,
        configure=configure,
    )


SPEC = build_spec()


def main() -> None:
    sys.exit(run(SPEC))
