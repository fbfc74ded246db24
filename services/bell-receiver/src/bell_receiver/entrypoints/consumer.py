"""The Kafka ingest worker: an IdempotentConsumer over Bell's audit topics (service_layer.ingest)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import asyncpg

from bell_receiver.service_layer.ingest import EventIngest
from bell_receiver.service_layer.metrics import BellMetrics
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.consumer import ConsumerMetrics, IdempotentConsumer
from yovision_platform.db import Identifier
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
        await idempotent.consume_topics(kafka, topics, stop, client_id=client_id)

    return run
