"""The projection worker: an IdempotentConsumer over Sense's device and path-ownership topics."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import asyncpg

from orphan_scanner.adapters.projection_store import ProjectionStore
from orphan_scanner.service_layer.projection import ProjectionHandler
from yovision_platform.avro import AvroSerde
from yovision_platform.consumer import ConsumerMetrics, IdempotentConsumer
from yovision_platform.db import Identifier
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
        await idempotent.consume_topics(kafka, topics, stop, client_id=client_id)

    return run
