"""A change and an auto-disable reach Kafka through the outbox relay and decode with the Avro contracts."""

from __future__ import annotations

from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.domain.model import AUTO_DISABLE_FAILURES
from tests.support.fixture_server import FixtureServer
from tests.support.kafka import publish_outbox, read_topic
from tests.support.signal_watcher_fixtures import FIXTURE_HOST, check_now, insert, make_spec, use_cases_on
from tests.support.stack import Stack
from yovision_platform.messaging import AvroSerde


async def test_trigger_and_disable_events_are_published_once(
    stack: Stack,
    topic: str,
    fixture_server: FixtureServer,
    units: PostgresUnitsOfWork,
    local_probe: ProbeClient,
    serde: AvroSerde,
) -> None:
    runner = use_cases_on(
        units, local_probe, topic_overrides={"WatcherTriggered": topic, "WatcherDisabled": topic}
    ).check_runner
    changing = await insert(units, "user-1", make_spec(fixture_server.url(FIXTURE_HOST, "/text")))
    failing = await insert(units, "user-2", make_spec(fixture_server.url(FIXTURE_HOST, "/redirect")))
    for text in ("a", "b"):
        fixture_server.state["text"] = text
        await check_now(units, runner, changing.id)
    for _ in range(AUTO_DISABLE_FAILURES):
        await check_now(units, runner, failing.id)
    await publish_outbox(units.pool, units.schema, stack.kafka_bootstrap)
    records = await read_topic(stack.kafka_bootstrap, topic, expected=2)
    decoded = sorted((serde.decode(r.value) for r in records), key=lambda e: e.event_type)
    assert [e.event_type for e in decoded] == ["WatcherDisabled", "WatcherTriggered"]
    disabled, triggered = decoded
    assert disabled.record["watcher_id"] == str(failing.id) and disabled.record["user_id"] == "user-2"
    assert triggered.record["watcher_id"] == str(changing.id)
    assert "new:\nb" in triggered.record["rendered_prompt"]
    assert {r.key for r in records} == {str(changing.id).encode(), str(failing.id).encode()}
