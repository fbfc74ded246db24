"""How far the projection is behind Kafka (`ProjectionProgress`): the real adapter (topic end offsets from
Kafka against the positions stored in PostgreSQL) and the fake alike. The contract stands in for the
projection consumer: `publish` sends messages, `apply_all` stores the positions the consumer would."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest

from orphan_scanner.adapters.memory import MemoryProjectionProgress
from orphan_scanner.adapters.projection_progress import KafkaProjectionProgress
from orphan_scanner.domain.gate import BlockReason
from orphan_scanner.service_layer.ports import ProjectionProgress
from tests.support.stack import MigratedSchema, Stack
from yovision_platform.messaging import fetch_end_offsets, start_producer

GROUP = "orphan-scanner-projection"
Publish = Callable[[int], Awaitable[None]]
ApplyAll = Callable[[], Awaitable[None]]


class ProjectionProgressContract:
    """Each adapter gives `progress`, `publish(n)`, `apply_all()` and `unavailable` (Kafka cannot tell)."""

    async def test_what_is_published_and_not_applied_lags(
        self, progress: ProjectionProgress, publish: Publish, apply_all: ApplyAll
    ) -> None:
        assert (await progress.lag(), await progress.wait(1.0)) == (0, None)  # nothing published yet
        await publish(3)
        assert await progress.lag() == 3
        assert await progress.wait(0.3) is BlockReason.PROJECTION_LAGGING
        await apply_all()
        assert await progress.lag() == 0
        assert await progress.wait(1.0) is None

    async def test_a_wait_ends_once_the_projection_catches_up(
        self, progress: ProjectionProgress, publish: Publish, apply_all: ApplyAll
    ) -> None:
        await publish(2)
        waiting = asyncio.create_task(progress.wait(20.0))
        await asyncio.sleep(0)
        await apply_all()
        assert await waiting is None

    async def test_kafka_that_cannot_tell_is_unavailable(self, unavailable: ProjectionProgress) -> None:
        assert await unavailable.wait(2.0) is BlockReason.PROJECTION_UNAVAILABLE
        assert await unavailable.lag() is None


class TestKafkaProjectionProgress(ProjectionProgressContract):
    @pytest.fixture
    def on_topic(
        self, stack: Stack, orphan_pool: asyncpg.Pool, orphan_schema: MigratedSchema
    ) -> Callable[[str], ProjectionProgress]:
        def on_topic(topic: str) -> ProjectionProgress:
            return KafkaProjectionProgress(
                orphan_pool,
                orphan_schema.name,
                kafka=stack.kafka_bootstrap,
                topics=[topic],
                consumer_group=GROUP,
                client_id="contract",
            )

        return on_topic

    @pytest.fixture
    def progress(self, on_topic: Callable[[str], ProjectionProgress], topic: str) -> ProjectionProgress:
        return on_topic(topic)

    @pytest.fixture
    async def publish(self, stack: Stack, topic: str) -> AsyncIterator[Publish]:
        producer = await start_producer(stack.kafka_bootstrap, client_id="contract-feed")

        async def publish(count: int) -> None:
            for n in range(count):
                await producer.send(topic, b"event", key=f"key-{n}".encode())
            await producer.flush()

        yield publish
        await producer.stop()

    @pytest.fixture
    def apply_all(
        self, stack: Stack, admin_conn: asyncpg.Connection, orphan_schema: MigratedSchema, topic: str
    ) -> ApplyAll:
        async def apply_all() -> None:
            ends = await fetch_end_offsets(stack.kafka_bootstrap, [topic], client_id="contract")
            await admin_conn.executemany(
                f"INSERT INTO {orphan_schema.name.quoted}.consumer_positions "
                "(consumer_group, topic, kafka_partition, next_offset) VALUES ($1, $2, $3, $4) "
                "ON CONFLICT (consumer_group, topic, kafka_partition) "
                "DO UPDATE SET next_offset = excluded.next_offset",
                [(GROUP, tp.topic, tp.partition, end) for tp, end in ends.items()],
            )

        return apply_all

    @pytest.fixture
    def unavailable(self, on_topic: Callable[[str], ProjectionProgress]) -> ProjectionProgress:
        return on_topic(f"test.{uuid.uuid4().hex[:10]}.missing.v1")  # a topic Kafka does not have


class TestMemoryProjectionProgress(ProjectionProgressContract):
    @pytest.fixture
    def progress(self) -> MemoryProjectionProgress:
        return MemoryProjectionProgress()

    @pytest.fixture
    def publish(self, progress: MemoryProjectionProgress) -> Publish:
        async def publish(count: int) -> None:
            progress.published += count

        return publish

    @pytest.fixture
    def apply_all(self, progress: MemoryProjectionProgress) -> ApplyAll:
        async def apply_all() -> None:
            progress.applied = progress.published

        return apply_all

    @pytest.fixture
    def unavailable(self) -> ProjectionProgress:
        progress = MemoryProjectionProgress()
        progress.unavailable = True
        return progress
