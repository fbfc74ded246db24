"""The Kafka ingest worker: the platform's IdempotentConsumer over Bell's audit topics, each new event
handed to `EventIngest` in the consumer's transaction."""

from __future__ import annotations

import asyncpg

from bell_receiver.adapters.unit_of_work import PostgresBellUnitOfWork
from bell_receiver.service_layer.ingest import EventIngest
from bell_receiver.service_layer.metrics import BellMetrics
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.consumer import ConsumerMetrics, IdempotentConsumer, InboundEvent
from yovision_platform.db import DbConnection, Identifier


def ingest_consumer(
    pool: asyncpg.Pool,
    schema: Identifier,
    metrics: BellMetrics,
    consumer_group: str,
    consumer_metrics: ConsumerMetrics | None = None,
) -> IdempotentConsumer:
    """The consumer; its worker is ``consumer.consume_topics(kafka, topics, stop, client_id=...)``."""
    ingest = EventIngest(metrics)

    async def handle(conn: DbConnection, event: InboundEvent) -> None:
        await ingest.handle(PostgresBellUnitOfWork.joining(conn, schema), event)

    serde = AvroSerde(SchemaRegistry.load())
    return IdempotentConsumer(
        pool,
        schema,
        consumer_group=consumer_group,
        decode=serde.decode,
        handler=handle,
        metrics=consumer_metrics,
    )
