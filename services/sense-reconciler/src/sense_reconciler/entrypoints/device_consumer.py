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
from yovision_platform.messaging import (
    AvroSerde,
    ConsumerMetrics,
    IdempotentConsumer,
    InboundEvent,
    KafkaTarget,
)
from yovision_platform.storage import DbConnection, Identifier


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
        self._client_id = client_id
        self._idempotent = IdempotentConsumer(
            pool, schema, consumer_group=group_id, decode=serde.decode, handler=self._handle, metrics=metrics
        )

    async def _handle(self, conn: DbConnection, event: InboundEvent) -> None:
        self._owned.wake()

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until `stop`. Every owned partition is revoked before the consumer leaves the group (so
        no claim starts on a partition Kafka hands to another member), and when consuming fails."""
        closing = asyncio.Event()

        async def revoke_on_stop() -> None:
            await stop.wait()
            self._owned.revoke(self._owned.snapshot())
            closing.set()

        watcher = asyncio.create_task(revoke_on_stop())
        try:
            await self._idempotent.consume_topics(
                self._kafka,
                [self._owned.topic],
                closing,
                client_id=self._client_id,
                on_assigned=self._owned.on_assigned,
                on_revoked=self._owned.on_revoked,
            )
        finally:
            watcher.cancel()
            self._owned.revoke(self._owned.snapshot())
