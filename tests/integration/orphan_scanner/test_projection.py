"""The ownership projection: Sense's events from Kafka, idempotent, positions recorded with the effects."""

from __future__ import annotations

import uuid

from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.support.orphan_scanner_fixtures import Orphan
from yovision_platform.messaging import fetch_end_offsets, stored_positions


async def claims(orphan: Orphan) -> dict[uuid.UUID, tuple[str, str, int]]:
    async with orphan.pool.acquire() as conn:
        rows = await conn.fetch(
            f"SELECT device_id, path_name, desired_state, config_version "
            f"FROM {orphan.schema.name.quoted}.device_claims"
        )
    return {r["device_id"]: (r["path_name"], r["desired_state"], r["config_version"]) for r in rows}


async def test_positions_reach_the_end_offsets_and_claims_follow_the_latest_event(orphan: Orphan) -> None:
    device = uuid.uuid4()
    await orphan.feed.device(device, "cam-1", "enabled")
    await orphan.feed.device(device, "cam-1", "disabled")
    await orphan.feed.device(device, "cam-1", "enabled")
    await orphan.feed.ownership("cam-1", device)
    await orphan.caught_up()
    assert (await claims(orphan))[device] == ("cam-1", "enabled", 3)
    ends = await fetch_end_offsets(
        orphan.settings.kafka_bootstrap, orphan.settings.projection_topics, client_id="test"
    )
    async with orphan.pool.acquire() as conn:
        positions = await stored_positions(conn, orphan.schema.name, orphan.settings.consumer_group)
    assert sum(ends.values()) == 4
    assert all(positions.get(tp, 0) == end for tp, end in ends.items())


async def test_redelivered_and_foreign_events_change_nothing(orphan: Orphan) -> None:
    device = uuid.uuid4()
    await orphan.feed.device(device, "cam-2", "enabled")
    await orphan.caught_up()
    async with orphan.pool.acquire() as conn:
        raw = await conn.fetchrow(
            f"SELECT topic, kafka_partition, kafka_offset FROM {orphan.schema.name.quoted}.processed_events"
        )
    assert raw is not None
    # Replay the same message (same event id) and send one with an unsupported type, then catch up.
    consumer = AIOKafkaConsumer(bootstrap_servers=orphan.settings.kafka_bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(raw["topic"], raw["kafka_partition"])
        consumer.assign([tp])
        consumer.seek(tp, raw["kafka_offset"])
        message = (await consumer.getmany(tp, timeout_ms=5000))[tp][0]
    finally:
        await consumer.stop()
    producer = orphan.feed._producer
    await producer.send_and_wait(raw["topic"], message.value, key=message.key)
    await producer.send_and_wait(raw["topic"], b"not avro at all", key=message.key)
    await orphan.feed.device(device, "cam-2", "disabled")
    await orphan.caught_up()
    assert (await claims(orphan))[device] == ("cam-2", "disabled", 2)
    async with orphan.pool.acquire() as conn:
        dead = await conn.fetch(
            f"SELECT error_code FROM {orphan.schema.name.quoted}.consumer_dead_letters ORDER BY id"
        )
        processed = await conn.fetchval(f"SELECT count(*) FROM {orphan.schema.name.quoted}.processed_events")
    assert [r["error_code"] for r in dead] == ["not_single_object"]
    assert processed == 2


async def test_lag_counts_the_events_not_yet_applied(orphan: Orphan) -> None:
    device = uuid.uuid4()
    await orphan.feed.device(device, "cam-3", "enabled")
    await orphan.caught_up()
    assert await orphan.components.progress.lag() == 0
    await orphan.stop_projection()
    await orphan.feed.device(device, "cam-3", "disabled")
    await orphan.feed.ownership("cam-3", device)
    await orphan.feed.flush()
    assert await orphan.components.progress.lag() == 2
