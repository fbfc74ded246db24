"""Has the ownership projection applied everything Sense published? Compare the topics' end offsets (taken
now) with the positions the projection committed together with its effects; wait a bounded time. The Kafka
and PostgreSQL adapter of `service_layer.ports.ProjectionProgress`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import asyncpg
from aiokafka.errors import KafkaError

from orphan_scanner.domain.gate import BlockReason
from yovision_platform.messaging import (
    KafkaAccessRefused,
    KafkaTarget,
    TopicUnavailable,
    fetch_end_offsets,
    stored_positions,
)
from yovision_platform.storage import Identifier

log = logging.getLogger(__name__)

CATCH_UP_POLL_SECONDS = 0.25
LAG_TIMEOUT_SECONDS = 5.0
# What fetching end offsets raises when Kafka cannot tell (broker down, topic missing, no answer in time).
KAFKA_UNAVAILABLE: tuple[type[BaseException], ...] = (
    TopicUnavailable,
    KafkaAccessRefused,
    KafkaError,
    TimeoutError,
    OSError,
)


class KafkaProjectionProgress:
    def __init__(
        self,
        pool: asyncpg.Pool,
        schema: Identifier,
        *,
        kafka: KafkaTarget,
        topics: Sequence[str],
        consumer_group: str,
        client_id: str,
    ) -> None:
        self._pool = pool
        self._schema = schema
        self._kafka = kafka
        self._topics = tuple(topics)
        self._group = consumer_group
        self._client_id = client_id

    async def lag(self) -> int | None:
        """Messages published but not yet applied, over every partition (for the lag metric); None when
        Kafka cannot tell."""
        try:
            ends = await fetch_end_offsets(
                self._kafka, self._topics, client_id=self._client_id, timeout_seconds=LAG_TIMEOUT_SECONDS
            )
        except KAFKA_UNAVAILABLE as exc:
            log.warning("projection lag unknown", extra={"error_code": type(exc).__name__})
            return None
        async with self._pool.acquire() as conn:
            positions = await stored_positions(conn, self._schema, self._group)
        return sum(max(0, end - positions.get(tp, 0)) for tp, end in ends.items())

    async def wait(self, timeout_seconds: float) -> BlockReason | None:
        """None once every partition's stored position reaches its end offset; else the block reason.
        `timeout_seconds` bounds the catching up; Kafka's answer has its own bound (LAG_TIMEOUT_SECONDS):
        a broker that answers more slowly than a short catch-up wait is lagging behind or not, never
        unavailable."""
        try:
            ends = await fetch_end_offsets(
                self._kafka, self._topics, client_id=self._client_id, timeout_seconds=LAG_TIMEOUT_SECONDS
            )
        except KAFKA_UNAVAILABLE:
            return BlockReason.PROJECTION_UNAVAILABLE
        deadline = time.monotonic() + timeout_seconds
        while True:
            async with self._pool.acquire() as conn:
                positions = await stored_positions(conn, self._schema, self._group)
            if all(positions.get(tp, 0) >= end for tp, end in ends.items()):
                return None
            if time.monotonic() >= deadline:
                return BlockReason.PROJECTION_LAGGING
            await asyncio.sleep(CATCH_UP_POLL_SECONDS)
