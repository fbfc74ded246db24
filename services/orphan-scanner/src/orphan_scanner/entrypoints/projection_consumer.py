"""The projection worker: an IdempotentConsumer over Sense's device and path-ownership topics."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import asyncpg

from orphan_scanner.adapters.projection_store import ProjectionStore
from orphan_scanner.service_layer.projection import ProjectionHandler
from yovision_platform.avro import AvroSerde
from yovision_platform.consumer import ConsumerMetrics, IdempotentConsumer, PositionRestoringListener
from yovision_platform.db import Identifier
from yovision_platform.kafka import create_consumer, start_client
from yovision_platform.kafka_security import KafkaTarget


def projection_worker(
    pool: asyncpg.Pool,
    schema: Identifier,
    serde: AvroSerde,
    *,
    kafka: KafkaTarget,
    topics: Sequence[str],
    consumer_group: str,
    client_id: str,
    consumer_metrics: ConsumerMetrics | None = None,
) -> Callable[[asyncio.Event], Awaitable[None]]:
    idempotent = IdempotentConsumer(
        pool,
        schema,
        consumer_group=consumer_group,
        decode=serde.decode,
        handler=ProjectionHandler(ProjectionStore(schema)).handle,
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
