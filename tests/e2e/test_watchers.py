"""Watchers: signal-watcher probes a local target; one agent-run event per value change and none without a
change (read from Kafka), SIGKILL in the middle changes nothing, five failures disable the watcher and one
WATCHER_DISABLED reaches the user's inbox in Bell. The environment's probes are confined to loopback: a
public address is refused before any connection."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.e2e.traces import trace_with
from tests.support.e2e_fixtures import Witness, client, eventually, user_token
from tests.support.e2e_flows import Target, price_watcher
from yovision_platform.messaging import AvroSerde, SchemaRegistry, seek_to_start
from yovision_platform.tools.environment import TEST_PROBE_ONLY_NETWORKS, LocalEnvironment

FAILURES_TO_DISABLE = 5
CHECK_TIMEOUT_SECONDS = 60.0


@pytest.fixture
async def target() -> AsyncIterator[Target]:
    async with Target() as server:
        yield server


async def checks(signal: httpx.AsyncClient, watcher_id: str) -> list[dict[str, Any]]:
    page = (await signal.get(f"/v1/signal-watchers/{watcher_id}/checks", params={"limit": 100})).json()
    items: list[dict[str, Any]] = page["items"]
    return list(reversed(items))  # oldest first


async def check_now(signal: httpx.AsyncClient, watcher_id: str) -> dict[str, Any]:
    """Ask for a real check (retrying while the 5 s spacing refuses it) and wait for its check row."""
    before = len(await checks(signal, watcher_id))

    async def requested() -> bool:
        response = await signal.post(f"/v1/signal-watchers/{watcher_id}/check")
        assert response.status_code in (202, 429), response.text
        return response.status_code == 202

    await eventually(requested, what="check request accepted")

    async def recorded() -> dict[str, Any] | None:
        rows = await checks(signal, watcher_id)
        return rows[before] if len(rows) > before else None

    return await eventually(recorded, within=CHECK_TIMEOUT_SECONDS, what="check recorded")


async def triggers_on_kafka(env: LocalEnvironment, watcher_id: str) -> dict[str, str | None]:
    """Distinct event ids of WatcherTriggered events for the watcher on the environment's trigger topic
    (at-least-once: a redelivered copy has the same event id, and counts once), each with the trace id of
    its `traceparent` header (None without one)."""
    serde = AvroSerde(SchemaRegistry.load())
    topic = env.topic("signal.trigger.v1")
    consumer = AIOKafkaConsumer(
        bootstrap_servers=env.kafka_bootstrap, group_id=None, isolation_level="read_committed"
    )
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or set())]
        if not partitions:
            await consumer._client.force_metadata_update()  # aiokafka has no public call for this
            partitions = [
                TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or set())
            ]
        consumer.assign(partitions)
        await seek_to_start(consumer, partitions)
        ends = await consumer.end_offsets(partitions)
        found: dict[str, str | None] = {}
        while any([await consumer.position(tp) < ends[tp] for tp in partitions]):
            for messages in (await consumer.getmany(timeout_ms=1000)).values():
                for message in messages:
                    record = serde.decode(message.value or b"").record
                    if record["watcher_id"] == watcher_id:
                        parent = dict(message.headers).get("traceparent")
                        trace_id = parent.decode().split("-")[1] if parent else None
                        found[str(record["envelope"]["event_id"])] = trace_id
        return found
    finally:
        await consumer.stop()


async def test_a_watcher_triggers_once_per_change_survives_a_kill_and_is_disabled_by_failures(
    env: LocalEnvironment, witness: Witness, target: Target
) -> None:
    user = f"e2e-user-{uuid.uuid4().hex[:6]}"
    token = await user_token(env, "signal-watcher", user)
    bell_token = await user_token(env, "bell-receiver", user)
    witness.secrets |= {token, bell_token}
    target.answer_price(100)
    async with client(env.url("signal-watcher"), witness, {"Authorization": f"Bearer {token}"}) as signal:
        created = await signal.post(
            "/v1/signal-watchers",
            json=price_watcher("price watch", "agent-e2e", target.url),
        )
        assert created.status_code == 201, created.text
        watcher_id = created.json()["id"]

        baseline = await check_now(signal, watcher_id)
        assert (baseline["changed"], baseline["error_code"], baseline["trigger_id"]) == (False, None, None)
        unchanged = await check_now(signal, watcher_id)
        assert (unchanged["changed"], unchanged["trigger_id"]) == (False, None)

        target.answer_price(120)
        changed = await check_now(signal, watcher_id)
        assert changed["changed"] is True and changed["trigger_id"] is not None
        # SIGKILL right after the trigger was recorded: its outbox row may or may not have been relayed.
        await env.kill("signal-watcher")
        await env.start("signal-watcher")
        after_kill = await check_now(signal, watcher_id)
        assert (after_kill["changed"], after_kill["trigger_id"]) == (False, None)
        triggers = await eventually(
            lambda: _some(triggers_on_kafka(env, watcher_id)), what="trigger on Kafka"
        )
        assert len(triggers) == 1, "one change, one agent-run event"

        # A change with no kill after it: its agent-run request carries the trace of the check that made
        # it (the killed one's spans may have died with the process, before their export).
        target.answer_price(130)
        assert (await check_now(signal, watcher_id))["changed"] is True
        triggers = await eventually(
            lambda: _more(triggers_on_kafka(env, watcher_id), than=1), what="the second trigger on Kafka"
        )
        assert len(triggers) == 2, "two changes, two agent-run events"
        trace_id = list(triggers.values())[-1]
        assert trace_id is not None, "the agent-run request carries a trace context"
        await eventually(
            lambda: trace_with(env, trace_id, {"signal-watcher": {"check"}}), what="the check's trace"
        )

        target.answer_text("not json")
        for n in range(FAILURES_TO_DISABLE):
            failed = await check_now(signal, watcher_id)
            assert failed["error_code"] is not None and failed["changed"] is False, failed
            status = (await signal.get(f"/v1/signal-watchers/{watcher_id}")).json()["status"]
            assert status == ("DISABLED" if n == FAILURES_TO_DISABLE - 1 else "ACTIVE")
        refused = await signal.post(f"/v1/signal-watchers/{watcher_id}/check")
        assert refused.status_code == 409 and refused.json()["error"] == "watcher_not_active"
        assert len(await triggers_on_kafka(env, watcher_id)) == 2, "failures trigger no agent run"

    async with client(env.url("bell-receiver"), witness, {"Authorization": f"Bearer {bell_token}"}) as bell:
        notes = await eventually(
            lambda: _disabled_notes(bell, watcher_id), what="WATCHER_DISABLED in the inbox"
        )
        assert len(notes) == 1


async def test_the_environments_probes_are_confined_to_loopback(
    env: LocalEnvironment, witness: Witness
) -> None:
    assert env.env_of("signal-watcher")["SIGNAL_PROBE_ONLY_NETWORKS"] == TEST_PROBE_ONLY_NETWORKS
    token = await user_token(env, "signal-watcher", f"e2e-user-{uuid.uuid4().hex[:6]}")
    witness.secrets.add(token)
    definition = {"name": "public", "agent_id": "a", "url": "http://93.184.216.34/", "prompt_template": "x"}
    async with client(env.url("signal-watcher"), witness, {"Authorization": f"Bearer {token}"}) as signal:
        created = await signal.post("/v1/signal-watchers", json=definition)
        tested = await signal.post("/v1/signal-watchers:test", json=definition)
        listed = (await signal.get("/v1/signal-watchers")).json()
    for refused in (created, tested):
        assert (refused.status_code, refused.json()["code"]) == (403, "probe_network_confined")
    assert listed["items"] == []


async def test_an_unsaved_definition_is_tested_without_saving_anything(
    env: LocalEnvironment, witness: Witness, target: Target
) -> None:
    token = await user_token(env, "signal-watcher", f"e2e-user-{uuid.uuid4().hex[:6]}")
    witness.secrets.add(token)
    target.answer_price(314)
    definition = {
        "name": "price preview",
        "agent_id": "agent-e2e",
        "url": target.url,
        "compare_mode": "JSON_FIELD",
        "json_path": "$.data.price",
        "prompt_template": "{diff}",
    }
    async with client(env.url("signal-watcher"), witness, {"Authorization": f"Bearer {token}"}) as signal:
        tested = await signal.post("/v1/signal-watchers:test", json=definition)
        refused = await signal.post("/v1/signal-watchers:test", json={**definition, "json_path": "$..price"})
        listed = (await signal.get("/v1/signal-watchers")).json()
    assert tested.status_code == 200, tested.text
    preview = tested.json()
    assert (preview["ok"], preview["value_excerpt"], preview["is_baseline"]) == (True, "314", True)
    assert target.requests == 1
    assert (refused.status_code, refused.json()["code"]) == (422, "invalid_json_path")
    assert "$.data.items[0].price" in refused.json()["detail"] and "$..price" not in refused.text
    assert listed["items"] == []


async def _more(found: Any, *, than: int) -> dict[str, str | None] | None:
    result: dict[str, str | None] = await found
    return result if len(result) > than else None


async def _some(found: Any) -> dict[str, str | None] | None:
    result: dict[str, str | None] = await found
    return result or None


async def _disabled_notes(bell: httpx.AsyncClient, watcher_id: str) -> list[dict[str, Any]] | None:
    items: list[dict[str, Any]] = (await bell.get("/v1/notifications", params={"limit": 100})).json()["items"]
    notes = [n for n in items if n["kind"] == "WATCHER_DISABLED" and n["data"]["watcher_id"] == watcher_id]
    return notes or None
