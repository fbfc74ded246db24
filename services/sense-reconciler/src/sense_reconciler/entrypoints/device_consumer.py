"""Partition ownership over Kafka: the `sense-reconciler` consumer group on the device topic.

Assignment adds partitions to `OwnedPartitions` (and wakes the loop); revocation removes them before the
hook returns, i.e. before Kafka hands them to another member. Each device event (key = device id, so it
arrives on the partition that owns the device) wakes the reconcile loop at once; it is recorded by the
idempotent consumer (processed_events + DB position), which is what restores positions on assignment.
"""

from __future__ import annotations

import asyncio

import asyncpg

from sense_reconciler.service_layer.ownership import OwnedPartitions
from yovision_platform.avro import AvroSerde
from yovision_platform.consumer import (
    ConsumerMetrics,
    IdempotentConsumer,
    InboundEvent,
    PositionRestoringListener,
)
from yovision_platform.db import DbConnection, Identifier
from yovision_platform.kafka import create_consumer, start_client
from yovision_platform.kafka_security import KafkaTarget


class DeviceEventConsumer:
    def __init__(
        self,
        pool: asyncpg.Pool,
        schema: Identifier,
        serde: AvroSerde,
        owned: OwnedPartitions,
        *,
        kafka: KafkaTarget,
        group_id: str,
        client_id: str,
        metrics: ConsumerMetrics | None = None,
    ) -> None:
        self._owned = owned
        self._kafka = kafka
        self._group_id = group_id
        self._client_id = client_id
        self._idempotent = IdempotentConsumer(
            pool, schema, consumer_group=group_id, decode=serde.decode, handler=self._handle, metrics=metrics
        )

    async def _handle(self, conn: DbConnection, event: InboundEvent) -> None:
        self._owned.wake()

    async def run(self, stop: asyncio.Event) -> None:
        consumer = create_consumer(self._kafka, group_id=self._group_id, client_id=self._client_id)
        listener = PositionRestoringListener(
            consumer, self._idempotent, on_assigned=self._owned.on_assigned, on_revoked=self._owned.on_revoked
        )
        consumer.subscribe([self._owned.topic], listener=listener)
        try:
            await start_client(consumer, self._kafka, close=consumer.stop)
            await self._idempotent.run(consumer, stop)
        finally:
            self._owned.revoke(self._owned.snapshot())
            await consumer.stop()
