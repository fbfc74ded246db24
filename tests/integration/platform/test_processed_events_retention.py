"""Pruning processed_events on real PostgreSQL against the real broker's topic configuration: only rows past
a retention longer than the topics', in bounded batches, and a redelivery inside the window stays a
duplicate."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.integration.platform.test_idempotent_consumer import consumer_for, record, smoke
from tests.support.stack import MigratedSchema, Stack
from yovision_platform.messaging import AvroSerde, ConsumeOutcome, ProcessedEventsPruner, SchemaRegistry

HOUR_SECONDS = 3600
TOPIC_RETENTION_MS = HOUR_SECONDS * 1000


async def make_topic(bootstrap: str, configs: dict[str, str]) -> str:
    name = f"test.retention-{uuid.uuid4().hex[:10]}.v1"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, 1, topic_configs=configs)])
    finally:
        await admin.close()
    return name


@pytest.fixture
async def topics(stack: Stack) -> AsyncIterator[dict[str, str]]:
    made = {
        "one_hour": await make_topic(stack.kafka_bootstrap, {"retention.ms": str(TOPIC_RETENTION_MS)}),
        "unlimited": await make_topic(stack.kafka_bootstrap, {"retention.ms": "-1"}),
        "compacted": await make_topic(stack.kafka_bootstrap, {"cleanup.policy": "compact"}),
    }
    yield made
    admin = AIOKafkaAdminClient(bootstrap_servers=stack.kafka_bootstrap)
    await admin.start()
    try:
        await admin.delete_topics(list(made.values()))
    finally:
        await admin.close()


def pruner(
    pool: asyncpg.Pool,
    schema: MigratedSchema,
    stack: Stack,
    topics: list[str],
    *,
    retention_seconds: float,
    batch_rows: int = 1000,
    max_batches: int = 100,
) -> ProcessedEventsPruner:
    return ProcessedEventsPruner(
        pool,
        schema.name,
        consumer_group="g1",
        kafka=stack.kafka_bootstrap,
        topics=topics,
        client_id="retention-test",
        retention_seconds=retention_seconds,
        batch_rows=batch_rows,
        max_batches=max_batches,
    )


async def age(admin: asyncpg.Connection, schema: MigratedSchema, hours: float) -> None:
    """Make every processed row so far look `hours` old (the runtime role may not update the table)."""
    await admin.execute(
        f'UPDATE "{schema.name}".processed_events SET processed_at = now() - make_interval(secs => $1)',
        hours * HOUR_SECONDS,
    )


async def test_only_rows_past_the_retention_go_and_a_redelivery_inside_it_is_a_duplicate(
    stack: Stack,
    admin_conn: asyncpg.Connection,
    runtime_pool: asyncpg.Pool,
    migrated: MigratedSchema,
    topics: dict[str, str],
) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    consumer = consumer_for(runtime_pool, migrated, serde)
    old, recent = smoke(serde, "old"), smoke(serde, "recent")
    assert await consumer.process(record(old, 0, topic=topics["one_hour"])) is ConsumeOutcome.APPLIED
    await age(admin_conn, migrated, hours=3)
    assert await consumer.process(record(recent, 1, topic=topics["one_hour"])) is ConsumeOutcome.APPLIED
    # retention 2 h: longer than the topic's 1 h; the 3 h old row goes, the fresh one stays
    job = pruner(runtime_pool, migrated, stack, [topics["one_hour"]], retention_seconds=2 * HOUR_SECONDS)
    result = await job.prune_once()
    assert (result.deleted, result.refused) == (1, None)
    # a redelivery inside the window is still a duplicate, and its effect is not applied again
    assert await consumer.process(record(recent, 1, topic=topics["one_hour"])) is ConsumeOutcome.DUPLICATE
    assert await consumer.process(record(recent, 9, topic=topics["one_hour"])) is ConsumeOutcome.DUPLICATE
    remaining = await runtime_pool.fetchval(f'SELECT count(*) FROM "{migrated.name}".processed_events')
    assert remaining == 1


@pytest.mark.parametrize(
    ("topic", "retention_seconds", "refused"),
    [
        ("one_hour", HOUR_SECONDS, "retention_not_longer_than_topic"),  # at the topic's: not longer
        ("one_hour", HOUR_SECONDS - 1, "retention_not_longer_than_topic"),
        ("one_hour", HOUR_SECONDS + 1, None),  # just over: allowed
        ("unlimited", 3650 * 24 * HOUR_SECONDS, "topic_retention_unlimited"),
        ("compacted", HOUR_SECONDS, None),
    ],
)
async def test_a_retention_not_longer_than_a_topics_deletes_nothing(
    stack: Stack,
    admin_conn: asyncpg.Connection,
    runtime_pool: asyncpg.Pool,
    migrated: MigratedSchema,
    topics: dict[str, str],
    topic: str,
    retention_seconds: float,
    refused: str | None,
) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    consumer = consumer_for(runtime_pool, migrated, serde)
    await consumer.process(record(smoke(serde, "x"), 0, topic=topics[topic]))
    await age(admin_conn, migrated, hours=24 * 4000)
    result = await pruner(
        runtime_pool, migrated, stack, [topics[topic]], retention_seconds=retention_seconds
    ).prune_once()
    assert result.refused == refused
    assert result.deleted == (0 if refused else 1)


async def test_an_unknown_topic_deletes_nothing(
    stack: Stack, admin_conn: asyncpg.Connection, runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    await consumer_for(runtime_pool, migrated, serde).process(record(smoke(serde, "x"), 0))
    await age(admin_conn, migrated, hours=24 * 400)
    missing = f"test.missing-{uuid.uuid4().hex[:8]}.v1"
    result = await pruner(
        runtime_pool, migrated, stack, [missing], retention_seconds=HOUR_SECONDS
    ).prune_once()
    assert (result.deleted, result.refused) == (0, "topic_retention_unknown")


async def test_rows_go_in_bounded_batches_and_other_groups_rows_stay(
    stack: Stack,
    admin_conn: asyncpg.Connection,
    runtime_pool: asyncpg.Pool,
    migrated: MigratedSchema,
    topics: dict[str, str],
) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    consumer = consumer_for(runtime_pool, migrated, serde)
    for offset in range(5):
        await consumer.process(record(smoke(serde, f"n{offset}"), offset, topic=topics["one_hour"]))
    other = consumer_for(runtime_pool, migrated, serde)
    other._group = "g2"
    await other.process(record(smoke(serde, "g2"), 0, topic=topics["one_hour"]))
    await age(admin_conn, migrated, hours=3)
    job = pruner(
        runtime_pool,
        migrated,
        stack,
        [topics["one_hour"]],
        retention_seconds=2 * HOUR_SECONDS,
        batch_rows=2,
        max_batches=2,
    )
    assert (await job.prune_once()).deleted == 4  # two batches of two per round
    assert (await job.prune_once()).deleted == 1
    assert (await job.prune_once()).deleted == 0
    groups = await runtime_pool.fetch(f'SELECT consumer_group FROM "{migrated.name}".processed_events')
    assert [r["consumer_group"] for r in groups] == ["g2"]
