"""Kafka ingest into the audit trail and the inbox (real Kafka + PostgreSQL), and the inbox read API."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from bell_receiver.entrypoints.ingest_consumer import ingest_consumer
from bell_receiver.entrypoints.main import postgres_use_cases
from bell_receiver.service_layer.metrics import BellMetrics
from tests.support.audit_push_client import fact, kafka_fields_of
from tests.support.bell_receiver_fixtures import Served
from tests.support.kafka import wait_until
from tests.support.stack import REPO_ROOT, Stack, create_topic, delete_topic, problem_code
from yovision_platform.messaging import AvroSerde, SchemaRegistry, build_event, start_producer
from yovision_platform.storage import Identifier

SAMPLES = REPO_ROOT / "schemas" / "avro" / "samples"


def sample(event_type: str, **overrides: Any) -> tuple[str, dict[str, Any]]:
    record = json.loads((SAMPLES / f"{event_type}.json").read_text())
    envelope = record.pop("envelope")
    return envelope["source_system"], record | overrides


@pytest.fixture
async def second_topic(stack: Stack) -> AsyncIterator[str]:
    name = f"test.{uuid.uuid4().hex[:10]}.v1"
    await create_topic(stack.kafka_bootstrap, name, partitions=1)
    yield name
    await delete_topic(stack.kafka_bootstrap, name)


def event(serde: AvroSerde, event_type: str, key_field: str, when_ms: int, **overrides: Any) -> bytes:
    source, payload = sample(event_type, **overrides)
    return build_event(serde, event_type, payload[key_field], payload, source, occurred_at_ms=when_ms).value


async def test_events_from_kafka_land_once_in_the_trail_and_the_inbox(
    served: Served, stack: Stack, topic: str, second_topic: str
) -> None:
    serde = AvroSerde(SchemaRegistry.load())
    relayed = fact(2, occurred_at="2026-11-30T01:02:03.456Z")
    assert (await served.relay.post_items([relayed])).status_code == 200
    same_fact = kafka_fields_of(relayed)
    when = int(datetime(2026, 11, 30, 1, 2, 3, 456000, tzinfo=UTC).timestamp() * 1000)
    relayed_id = uuid.UUID(relayed["event_id"])
    values = [
        build_event(
            serde,
            "DeviceAuditRecorded",
            "dev-0001",
            same_fact,
            "sense",
            event_id=relayed_id,
            correlation_id="req-42",
            occurred_at_ms=when,
        ).value,
        build_event(
            serde,
            "DeviceAuditRecorded",
            "dev-0001",
            {**same_fact, "actor": "operator:eve"},
            "sense",
            event_id=relayed_id,
            correlation_id="req-42",
            occurred_at_ms=when,
        ).value,
        event(serde, "ScanReported", "scan_id", when),
        event(serde, "PathDisposed", "scan_id", when),
        event(serde, "MaterialUploaded", "material_id", when),
        event(serde, "TranscodeFailed", "material_id", when),
    ]
    inbox_values = [
        event(serde, "WatcherDisabled", "watcher_id", when + 1, user_id="user-3", watcher_name="older"),
        event(serde, "WatcherDisabled", "watcher_id", when + 2, user_id="user-3", watcher_name="newer"),
        event(serde, "WatcherDisabled", "watcher_id", when + 3, user_id="user-4", watcher_name="other user"),
    ]
    producer = await start_producer(stack.kafka_bootstrap, client_id="bell-test")
    try:
        for value in [*values, values[2]]:  # the last one is a redelivery
            await producer.send_and_wait(topic, value, key=b"k")
        for value in inbox_values:
            await producer.send_and_wait(second_topic, value, key=b"w")
    finally:
        await producer.stop()

    registry = CollectorRegistry()
    schema = Identifier(served.schema.name)
    use_cases = postgres_use_cases(served.pool, schema, BellMetrics.create(registry))
    consumer = ingest_consumer(served.pool, schema, use_cases.ingester, f"bell-test-{uuid.uuid4().hex[:8]}")
    stop = asyncio.Event()
    task = asyncio.create_task(
        consumer.consume_topics(stack.kafka_bootstrap, [topic, second_topic], stop, client_id="bell-test")
    )
    s = f'"{schema}"'

    async def all_seen() -> bool:
        done = await served.pool.fetchval(f"SELECT count(*) FROM {s}.processed_events")
        dead = await served.pool.fetchval(f"SELECT count(*) FROM {s}.consumer_dead_letters")
        return bool(done == 8 and dead == 1)

    try:
        await wait_until(all_seen, timeout_seconds=60)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)

    rows = await served.pool.fetch(f"SELECT source_system, event_type, channel, action FROM {s}.audit_events")
    assert sorted((r["source_system"], r["event_type"], r["channel"]) for r in rows) == [
        ("media", "MaterialUploaded", "kafka"),
        ("media", "TranscodeFailed", "kafka"),
        ("orphan", "PathDisposed", "kafka"),
        ("orphan", "ScanReported", "kafka"),
        ("sense", "DeviceAuditRecorded", "http_relay"),
        ("signal", "WatcherDisabled", "kafka"),
        ("signal", "WatcherDisabled", "kafka"),
        ("signal", "WatcherDisabled", "kafka"),
    ]
    assert {r["action"] for r in rows} >= {"orphan.path_disposed", "media.transcode_failed"}
    dead = await served.pool.fetchrow(f"SELECT error_code, event_id FROM {s}.consumer_dead_letters")
    assert (dead["error_code"], dead["event_id"]) == ("id_conflict", relayed_id)
    assert registry.get_sample_value("bell_ingest_events_total", {"outcome": "already_stored"}) == 1
    assert registry.get_sample_value("bell_ingest_events_total", {"outcome": "stored"}) == 7

    await check_inbox_api(served)


async def check_inbox_api(served: Served) -> None:
    http = served.relay.http
    mine = served.bearer("user-3")
    first = await http.get("/v1/notifications", params={"limit": 1}, headers=mine)
    assert first.status_code == 200
    page = first.json()
    assert [i["data"]["watcher_name"] for i in page["items"]] == ["newer"]
    assert page["items"][0]["kind"] == "WATCHER_DISABLED"
    second = await http.get(
        "/v1/notifications",
        params={"limit": 1, "cursor": page["next_cursor"]},
        headers=mine,
    )
    assert [i["data"]["watcher_name"] for i in second.json()["items"]] == ["older"]
    assert second.json()["next_cursor"] is None
    other = await http.get("/v1/notifications", headers=served.bearer("user-4"))
    assert [i["data"]["watcher_name"] for i in other.json()["items"]] == ["other user"]
    assert (await http.get("/v1/notifications")).status_code == 401
    bad = await http.get("/v1/notifications", params={"cursor": "!!"}, headers=mine)
    assert (bad.status_code, problem_code(bad)) == (400, "invalid_cursor")
    nul = await http.get("/v1/notifications", params={"cursor": "a\u0000"}, headers=mine)
    assert (nul.status_code, problem_code(nul)) == (400, "invalid_text")
    for limit, status in ((0, 422), (1, 200), (100, 200), (101, 422)):
        response = await http.get("/v1/notifications", params={"limit": limit}, headers=mine)
        assert response.status_code == status
        if status == 422:
            assert problem_code(response) == "invalid_request"
