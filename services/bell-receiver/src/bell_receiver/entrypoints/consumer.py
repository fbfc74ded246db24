"""The Kafka ingest worker: an IdempotentConsumer over Bell's audit topics (service_layer.ingest)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import asyncpg

from bell_receiver.metrics import BellMetrics
from bell_receiver.service_layer.ingest import EventIngest
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.consumer import ConsumerMetrics, IdempotentConsumer, PositionRestoringListener
from yovision_platform.db import Identifier
from yovision_platform.kafka import create_consumer, start_client
from yovision_platform.kafka_security import KafkaTarget


def ingest_worker(
    pool: asyncpg.Pool,
    schema: Identifier,
    metrics: BellMetrics,
    *,
    kafka: KafkaTarget,
    topics: Sequence[str],
    consumer_group: str,
    client_id: str,
    consumer_metrics: ConsumerMetrics | None = None,
) -> Callable[[asyncio.Event], Awaitable[None]]:
    serde = AvroSerde(SchemaRegistry.load())
    idempotent = IdempotentConsumer(
        pool,
        schema,
        consumer_group=consumer_group,
        decode=serde.decode,
        handler=EventIngest(schema, metrics).handle,
        metrics=consumer_metrics,
    )

    async def run(stop: asyncio.Event) -> None:
        consumer = create_consumer(kafka, group_id=consumer_group, client_id=client_id)
        consumer.subscribe(list(topics), listener=PositionRestoringListener(consumer, idempotent))
        await start_client(consumer, kafka, close=consumer.stop)
        try:
            await idempotent.run(consumer, stop)
        finally:
            await consumer.stop()

    return run
