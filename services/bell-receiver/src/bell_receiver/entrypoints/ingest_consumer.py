"""The Kafka ingest worker: the platform's IdempotentConsumer over Bell's audit topics, each new event
handed to `EventIngester` in the consumer's transaction."""

from __future__ import annotations

import asyncpg

from bell_receiver.adapters.unit_of_work import PostgresBellUnitOfWork
from bell_receiver.service_layer.ingest import EventIngester
from yovision_platform.messaging import (
    AvroSerde,
    ConsumerMetrics,
    IdempotentConsumer,
    InboundEvent,
    SchemaRegistry,
)
from yovision_platform.storage import DbConnection, Identifier


def ingest_consumer(
    pool: asyncpg.Pool,
    schema: Identifier,
    ingester: EventIngester,
    consumer_group: str,
    consumer_metrics: ConsumerMetrics | None = None,
) -> IdempotentConsumer:
    """The consumer; its worker is ``consumer.consume_topics(kafka, topics, stop, client_id=...)``."""

    async def handle(conn: DbConnection, event: InboundEvent) -> None:
        await ingester.handle(PostgresBellUnitOfWork.joining(conn, schema), event)

    serde = AvroSerde(SchemaRegistry.load())
    return IdempotentConsumer(
        pool,
        schema,
        consumer_group=consumer_group,
        decode=serde.decode,
        handler=handle,
        metrics=consumer_metrics,
    )
