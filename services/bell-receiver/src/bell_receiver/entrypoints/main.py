"""Production wiring of bell-receiver: `bell-receiver serve | migrate | check-config`; builds the PostgreSQL
adapters, calls `bootstrap` and mounts the API and the workers on them."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

import asyncpg

from bell_receiver.adapters.audit_reader import PostgresAuditReader
from bell_receiver.adapters.unit_of_work import PostgresBellUnitOfWork
from bell_receiver.bootstrap import BellUseCases, bootstrap
from bell_receiver.entrypoints.api import SERVICE_NAME, mount_api
from bell_receiver.entrypoints.dependencies import BatchChecks
from bell_receiver.entrypoints.ingest_consumer import ingest_consumer
from bell_receiver.entrypoints.receipt_purge_worker import receipt_purge_worker
from bell_receiver.service_layer.ingest import CONSUMER_GROUP, audit_topics
from bell_receiver.service_layer.metrics import BellMetrics
from bell_receiver.service_layer.ports import UnitOfWorkFactory
from bell_receiver.settings import BellReceiverSettings
from yovision_platform.messaging import ConsumerMetrics, default_catalog
from yovision_platform.storage import Identifier
from yovision_platform.web import ServiceContext, ServiceSpec, migrations_dir_of, use_access_tokens
from yovision_platform.web import main as run

MIGRATIONS_DIR = migrations_dir_of("bell_receiver")


def unit_of_work(pool: asyncpg.Pool, schema: Identifier) -> UnitOfWorkFactory:
    return lambda: PostgresBellUnitOfWork(pool, schema)


def postgres_use_cases(pool: asyncpg.Pool, schema: Identifier, metrics: BellMetrics) -> BellUseCases:
    """Bell's use cases on PostgreSQL (what `configure` and the tests serving the real app mount)."""
    return bootstrap(
        uow=unit_of_work(pool, schema), audit_reader=PostgresAuditReader(pool, schema), metrics=metrics
    )


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
        use_cases = postgres_use_cases(ctx.pool, ctx.plan.schema, metrics)
        mount_api(ctx.app, use_cases=use_cases, checks=BatchChecks(settings.audit_push_keyring, metrics))
        use_access_tokens(ctx)
        group = kafka.group(consumer_group)
        ingest = ingest_consumer(
            ctx.pool, ctx.plan.schema, use_cases.ingester, group, ConsumerMetrics(ctx.registry)
        )
        client_id = f"{SERVICE_NAME}-{settings.instance_id}"

        async def consume(stop: asyncio.Event) -> None:
            await ingest.consume_topics(settings.kafka, read, stop, client_id=client_id)

        ctx.add_worker("audit-ingest", consume)
        ctx.add_processed_events_pruner(consumer_group=group, topics=read)
        ctx.add_worker("receipt-purge", receipt_purge_worker(use_cases.receipt_purger))

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
