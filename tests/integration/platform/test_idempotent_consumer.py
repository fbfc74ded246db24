from __future__ import annotations

import asyncpg
import pytest
from aiokafka import ConsumerRecord

from tests.support.stack import MigratedSchema
from yovision_platform.messaging import (
    AvroSerde,
    ConsumeOutcome,
    EventRejected,
    IdempotentConsumer,
    InboundEvent,
    SchemaRegistry,
    build_event,
)


def record(
    value: bytes, offset: int, topic: str = "t.v1", partition: int = 0
) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=topic,
        partition=partition,
        offset=offset,
        timestamp=0,
        timestamp_type=0,
        key=b"k",
        value=value,
        checksum=None,
        serialized_key_size=1,
        serialized_value_size=len(value),
        headers=(),
    )


def smoke(serde: AvroSerde, note: str, **kwargs: object) -> bytes:
    return build_event(
        serde,
        "SmokeTestEvent",
        "run-1",
        {"run_id": "run-1", "produced_by": "test", "note": note},
        "platform",
        **kwargs,
    ).value


async def effects(pool: asyncpg.Pool, schema: str) -> int:
    return int(await pool.fetchval(f'SELECT coalesce(sum(applied), 0) FROM "{schema}".applied_effects'))


def consumer_for(
    pool: asyncpg.Pool, schema: MigratedSchema, serde: AvroSerde, reject: bool = False
) -> IdempotentConsumer:
    async def apply(conn: asyncpg.Connection, event: InboundEvent) -> None:
        await conn.execute(
            f"""INSERT INTO "{schema.name}".applied_effects (event_id, event_type) VALUES ($1, $2)
                ON CONFLICT (event_id) DO UPDATE SET applied = applied_effects.applied + 1""",
            event.event_id,
            event.event_type,
        )
        if reject:
            raise EventRejected("unsupported_event")

    return IdempotentConsumer(pool, schema.name, consumer_group="g1", decode=serde.decode, handler=apply)


async def test_a_redelivered_event_changes_nothing(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    consumer = consumer_for(runtime_pool, migrated, serde)
    value = smoke(serde, "first")
    assert await consumer.process(record(value, 0)) is ConsumeOutcome.APPLIED
    assert await consumer.process(record(value, 0)) is ConsumeOutcome.DUPLICATE
    assert await consumer.process(record(value, 7)) is ConsumeOutcome.DUPLICATE
    assert await effects(runtime_pool, migrated.name) == 1
    positions = await consumer.stored_positions()
    assert list(positions.values()) == [8]


async def test_same_event_id_with_another_payload_is_an_id_conflict(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    consumer = consumer_for(runtime_pool, migrated, serde)
    original = build_event(
        serde, "SmokeTestEvent", "run-1", {"run_id": "run-1", "produced_by": "test", "note": "a"}, "platform"
    )
    forged = smoke(serde, "b", event_id=original.event_id)
    assert await consumer.process(record(original.value, 0)) is ConsumeOutcome.APPLIED
    assert await consumer.process(record(forged, 1)) is ConsumeOutcome.ID_CONFLICT
    assert await effects(runtime_pool, migrated.name) == 1
    dead = await runtime_pool.fetch(
        f'SELECT error_code, event_id, kafka_offset FROM "{migrated.name}".consumer_dead_letters'
    )
    assert [(r["error_code"], r["event_id"], r["kafka_offset"]) for r in dead] == [
        ("id_conflict", original.event_id, 1)
    ]


async def test_an_undecodable_message_is_dead_lettered_with_its_code(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    consumer = consumer_for(runtime_pool, migrated, serde)
    assert await consumer.process(record(b"not avro at all", 3)) is ConsumeOutcome.UNDECODABLE
    unknown = b"\xc3\x01" + b"\x00" * 8 + b"\x02"
    assert await consumer.process(record(unknown, 4)) is ConsumeOutcome.UNDECODABLE
    codes = await runtime_pool.fetch(
        f'SELECT error_code FROM "{migrated.name}".consumer_dead_letters ORDER BY kafka_offset'
    )
    assert [r["error_code"] for r in codes] == ["not_single_object", "unknown_schema"]
    assert list((await consumer.stored_positions()).values()) == [5]


async def test_a_rejected_event_leaves_no_partial_effect(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    consumer = consumer_for(runtime_pool, migrated, serde, reject=True)
    assert await consumer.process(record(smoke(serde, "x"), 0)) is ConsumeOutcome.REJECTED
    assert await effects(runtime_pool, migrated.name) == 0
    processed = await runtime_pool.fetchval(f'SELECT count(*) FROM "{migrated.name}".processed_events')
    assert processed == 0
    code = await runtime_pool.fetchval(f'SELECT error_code FROM "{migrated.name}".consumer_dead_letters')
    assert code == "unsupported_event"


async def test_a_transient_handler_failure_rolls_back_everything(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    serde = AvroSerde(SchemaRegistry.load())

    async def flaky(conn: asyncpg.Connection, event: InboundEvent) -> None:
        await conn.execute(
            f'INSERT INTO "{migrated.name}".applied_effects (event_id, event_type) VALUES ($1, $2)',
            event.event_id,
            event.event_type,
        )
        raise ConnectionError("downstream unavailable")

    consumer = IdempotentConsumer(
        runtime_pool, migrated.name, consumer_group="g1", decode=serde.decode, handler=flaky
    )
    value = smoke(serde, "x")
    try:
        await consumer.process(record(value, 0))
    except ConnectionError:
        pass
    else:
        raise AssertionError("transient failures must propagate so the message is retried")
    assert await effects(runtime_pool, migrated.name) == 0
    assert await consumer.stored_positions() == {}
    assert (
        await consumer_for(runtime_pool, migrated, serde).process(record(value, 0)) is ConsumeOutcome.APPLIED
    )


async def test_a_batch_applies_each_message_once_and_advances_past_the_last(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    consumer = consumer_for(runtime_pool, migrated, serde)
    first, second = smoke(serde, "a"), smoke(serde, "b")
    batch = [record(first, 10), record(b"junk", 11), record(first, 12), record(second, 13)]
    assert await consumer.process_batch(batch) == [
        ConsumeOutcome.APPLIED,
        ConsumeOutcome.UNDECODABLE,
        ConsumeOutcome.DUPLICATE,  # a redelivery inside the same batch is recognised too
        ConsumeOutcome.APPLIED,
    ]
    assert await effects(runtime_pool, migrated.name) == 2
    assert list((await consumer.stored_positions()).values()) == [14]


async def test_a_transient_failure_rolls_back_the_whole_batch(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    calls = 0

    async def fails_on_second(conn: asyncpg.Connection, event: InboundEvent) -> None:
        nonlocal calls
        calls += 1
        await conn.execute(
            f'INSERT INTO "{migrated.name}".applied_effects (event_id, event_type) VALUES ($1, $2)',
            event.event_id,
            event.event_type,
        )
        if calls == 2:
            raise ConnectionError("downstream unavailable")

    consumer = IdempotentConsumer(
        runtime_pool, migrated.name, consumer_group="g1", decode=serde.decode, handler=fails_on_second
    )
    batch = [record(smoke(serde, "a"), 0), record(smoke(serde, "b"), 1)]
    with pytest.raises(ConnectionError):
        await consumer.process_batch(batch)
    assert await effects(runtime_pool, migrated.name) == 0
    assert await consumer.stored_positions() == {}
    assert await consumer.process_batch(batch) == [ConsumeOutcome.APPLIED, ConsumeOutcome.APPLIED]


async def test_a_batch_spans_one_partition_only(runtime_pool: asyncpg.Pool, migrated: MigratedSchema) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    consumer = consumer_for(runtime_pool, migrated, serde)
    with pytest.raises(ValueError, match="one partition"):
        await consumer.process_batch(
            [record(smoke(serde, "a"), 0), record(smoke(serde, "b"), 0, partition=1)]
        )
