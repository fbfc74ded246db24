"""Composition root of bell-receiver: `bell-receiver serve | migrate | check-config`."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from bell_receiver.entrypoints.api import SERVICE_NAME, install_api
from bell_receiver.entrypoints.consumer import ingest_consumer
from bell_receiver.entrypoints.receipt_purge import receipt_purge_worker
from bell_receiver.entrypoints.wiring import postgres_use_cases, unit_of_work
from bell_receiver.service_layer.ingest import CONSUMER_GROUP, audit_topics
from bell_receiver.service_layer.metrics import BellMetrics
from bell_receiver.settings import BellReceiverSettings
from yovision_platform.consumer import ConsumerMetrics
from yovision_platform.events import default_catalog
from yovision_platform.service import ServiceContext, ServiceSpec, migrations_dir_of
from yovision_platform.service import main as run

MIGRATIONS_DIR = migrations_dir_of("bell_receiver")


def build_spec(
    schema: str = "bell", *, topics: Sequence[str] | None = None, consumer_group: str = CONSUMER_GROUP
) -> ServiceSpec[BellReceiverSettings]:
    """The service; tests pass their own schema, (physical) topics and consumer group. By default Bell reads
    the catalogue's topics of the events it ingests, under ``BELL_KAFKA_PREFIX``."""

    async def configure(ctx: ServiceContext[BellReceiverSettings]) -> None:
        settings = ctx.settings
        kafka = settings.kafka_names
        read = topics if topics is not None else kafka.topics(audit_topics(default_catalog()))
        metrics = BellMetrics.create(ctx.registry)
        install_api(
            ctx.app,
            use_cases=postgres_use_cases(ctx.pool, ctx.plan.schema, metrics),
            keyring=settings.relay_keyring,
            verifier=settings.token_verifier,
            metrics=metrics,
        )
        group = kafka.group(consumer_group)
        ingest = ingest_consumer(ctx.pool, ctx.plan.schema, metrics, group, ConsumerMetrics(ctx.registry))
        client_id = f"{SERVICE_NAME}-{settings.instance_id}"

        async def consume(stop: asyncio.Event) -> None:
            await ingest.consume_topics(settings.kafka, read, stop, client_id=client_id)

        ctx.add_worker("audit-ingest", consume)
        ctx.add_processed_events_pruner(consumer_group=group, topics=read)
        ctx.add_worker("receipt-purge", receipt_purge_worker(unit_of_work(ctx.pool, ctx.plan.schema)))

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
