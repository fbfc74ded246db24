"""The projection consumer: the platform's IdempotentConsumer over Sense's device and path-ownership topics,
each event applied by the `OwnershipProjector` use case in the consumer's own transaction (a joined unit of
work)."""

from __future__ import annotations

import asyncpg

from orphan_scanner.adapters.unit_of_work import PostgresOrphanUnitOfWork
from orphan_scanner.service_layer.projection import OwnershipProjector
from yovision_platform.messaging import AvroSerde, ConsumerMetrics, IdempotentConsumer, InboundEvent
from yovision_platform.storage import DbConnection, Identifier


def projection_consumer(
    pool: asyncpg.Pool,
    schema: Identifier,
    serde: AvroSerde,
    projector: OwnershipProjector,
    *,
    consumer_group: str,
    metrics: ConsumerMetrics | None = None,
) -> IdempotentConsumer:
    """Run it with `consume_topics(kafka, topics, stop, client_id=...)`."""

    async def handle(conn: DbConnection, event: InboundEvent) -> None:
        await projector.apply(PostgresOrphanUnitOfWork.joining(conn, schema), event)

    return IdempotentConsumer(
        pool, schema, consumer_group=consumer_group, decode=serde.decode, handler=handle, metrics=metrics
    )
