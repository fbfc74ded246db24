"""The probe confinement (SIGNAL_PROBE_ONLY_NETWORKS) on the real probe client, over real sockets: an address
outside the listed networks, public ones included, is refused before any connection attempt, whether it is
an IP literal or what a name resolves to; through the API (create, update, the tests of a stored and of an
unsaved definition) and through a check the scheduler runs, which records the stable code. Connection
attempts are counted where the probe client opens them (`probes_stay_confined` of the conftest: httpcore's
AnyIO backend, behind `GuardedNetworkBackend`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.domain.errors import NetworkConfined
from signal_watcher.domain.probes import ProbeFailed
from signal_watcher.domain.ssrf import AddressGuard
from signal_watcher.entrypoints.scheduler_worker import Scheduler
from signal_watcher.service_layer.metrics import SignalMetrics
from tests.support.fixture_server import FixtureServer
from tests.support.signal_watcher_fixtures import (
    FIXTURE_HOST,
    LOOPBACK_FOR_TESTS,
    LOOPBACK_NETWORK,
    Bearer,
    Connections,
    api_client,
    checks_of,
    fake_resolver,
    insert,
    make_due,
    make_spec,
    stored,
    use_cases_on,
)
from tests.support.stack import problem_code
from yovision_platform.messaging import AvroSerde

ALICE = Bearer("alice")
NAMES = {
    FIXTURE_HOST: ["127.0.0.1"],
    "public.example.com": ["93.184.216.34"],
    "public6.example.com": ["2606:4700::1111"],
    "half.example.com": ["127.0.0.1", "93.184.216.34"],  # one answer inside, one outside
}


@pytest.fixture
async def confined_probe() -> AsyncIterator[ProbeClient]:
    """The real client, allowed 127.0.0.0/8 and confined as every test environment, names from NAMES."""
    client = ProbeClient(resolver=fake_resolver(NAMES), guard=LOOPBACK_FOR_TESTS)
    yield client
    await client.aclose()


def _body(url: str) -> dict[str, object]:
    return {"name": "w", "agent_id": "a", "url": url, "prompt_template": "{diff}"}


async def test_the_counter_sees_a_probe_that_connects(
    fixture_server: FixtureServer, confined_probe: ProbeClient, probes_stay_confined: Connections
) -> None:
    """The counting layer is live: an allowed target is one connection attempt (so 0 below means none)."""
    response = await confined_probe.probe("GET", fixture_server.url(FIXTURE_HOST, "/status/200"), [], None)
    assert response.status_code == 200
    assert probes_stay_confined.attempts == ["127.0.0.1"]


@pytest.mark.parametrize(
    "host", ["93.184.216.34", "8.8.8.8", "public.example.com", "public6.example.com", "half.example.com"]
)
async def test_a_public_literal_or_name_is_refused_with_zero_connection_attempts(
    fixture_server: FixtureServer, confined_probe: ProbeClient, probes_stay_confined: Connections, host: str
) -> None:
    url = fixture_server.url(host, "/echo")
    with pytest.raises(ProbeFailed) as failed:
        await confined_probe.probe("GET", url, [], None)
    assert failed.value.code == "probe_network_confined"
    with pytest.raises((ProbeFailed, NetworkConfined)) as refused:
        await confined_probe.preflight(url)
    assert refused.value.code == "probe_network_confined"
    assert probes_stay_confined.attempts == []
    assert fixture_server.requests["/echo"] == 0


async def test_the_tests_fence_refuses_a_probe_through_an_unconfined_guard(
    fixture_server: FixtureServer, probes_stay_confined: Connections
) -> None:
    """The conftest's fence: a test that forgot the confinement cannot connect, and would fail."""
    unconfined = ProbeClient(resolver=fake_resolver(NAMES), guard=AddressGuard.allowing([LOOPBACK_NETWORK]))
    try:
        with pytest.raises(ProbeFailed) as failed:
            await unconfined.probe("GET", fixture_server.url(FIXTURE_HOST, "/echo"), [], None)
    finally:
        await unconfined.aclose()
    assert failed.value.code == "connect_failed" and fixture_server.requests["/echo"] == 0
    assert probes_stay_confined.unconfined == ["127.0.0.1"]
    probes_stay_confined.unconfined.clear()  # seen: this test's teardown would fail on it otherwise


@pytest.mark.parametrize(
    "host", ["93.184.216.34", "public.example.com", "public6.example.com", "half.example.com"]
)
async def test_create_update_and_an_unsaved_test_refuse_addresses_outside_the_confinement(
    fixture_server: FixtureServer,
    units: PostgresUnitsOfWork,
    confined_probe: ProbeClient,
    probes_stay_confined: Connections,
    host: str,
) -> None:
    url = fixture_server.url(host, "/echo")
    async with api_client(units, confined_probe) as api:
        created = await api.post("/v1/signal-watchers", json=_body(url), headers=ALICE)
        kept = await api.post(
            "/v1/signal-watchers", json=_body(fixture_server.url(FIXTURE_HOST, "/text")), headers=ALICE
        )
        assert kept.status_code == 201, kept.text
        path = f"/v1/signal-watchers/{kept.json()['id']}"
        updated = await api.put(path, json=_body(url), headers=ALICE)
        tested = await api.post("/v1/signal-watchers:test", json=_body(url), headers=ALICE)
        unchanged = (await api.get(path, headers=ALICE)).json()
    for refused in (created, updated, tested):
        assert (refused.status_code, problem_code(refused)) == (403, "probe_network_confined"), refused.text
        assert host not in refused.text  # no input echoed
    assert unchanged["url"] == fixture_server.url(FIXTURE_HOST, "/text")
    assert probes_stay_confined.attempts == []  # the create above only resolved FIXTURE_HOST
    assert fixture_server.requests["/echo"] == 0


async def test_a_stored_watcher_outside_the_confinement_fails_its_checks_with_the_stable_code(
    fixture_server: FixtureServer,
    units: PostgresUnitsOfWork,
    confined_probe: ProbeClient,
    serde: AvroSerde,
    probes_stay_confined: Connections,
) -> None:
    """Written before the confinement (a public literal), or a name that resolves outside it now: the
    scheduler's checks fail with `probe_network_confined`, recorded and counted like any failure, and
    test-now says the same; nothing connects."""
    literal = await insert(units, "alice", make_spec(fixture_server.url("93.184.216.34", "/echo")))
    name = await insert(units, "alice", make_spec(fixture_server.url("public.example.com", "/echo")))
    registry = CollectorRegistry()
    runner = use_cases_on(units, confined_probe, metrics=SignalMetrics.create(registry)).check_runner
    scheduler = Scheduler(runner, "instance-a")
    await make_due(units.pool, units.schema)
    assert await scheduler.scan() == 2
    await scheduler.drain(30)
    for record in (literal, name):
        [check] = await checks_of(units, record.id)
        assert (check.error_code, check.http_status, check.changed) == ("probe_network_confined", None, False)
        assert (await stored(units, "alice", record.id)).consecutive_failures == 1
    failures = registry.get_sample_value("signal_check_failures_total", {"code": "probe_network_confined"})
    assert failures == 2.0
    async with api_client(units, confined_probe) as api:
        tested = await api.post(f"/v1/signal-watchers/{name.id}/test", headers=ALICE)
    assert (tested.json()["ok"], tested.json()["error_code"]) == (False, "probe_network_confined")
    assert probes_stay_confined.attempts == [] and fixture_server.requests["/echo"] == 0


async def test_a_name_inside_the_confinement_is_probed_and_judged(
    fixture_server: FixtureServer,
    units: PostgresUnitsOfWork,
    confined_probe: ProbeClient,
    serde: AvroSerde,
    probes_stay_confined: Connections,
) -> None:
    fixture_server.state["text"] = "inside"
    record = await insert(units, "alice", make_spec(fixture_server.url(FIXTURE_HOST, "/text")))
    scheduler = Scheduler(use_cases_on(units, confined_probe).check_runner, "instance-a")
    await make_due(units.pool, units.schema, record.id)
    assert await scheduler.scan() == 1
    await scheduler.drain(30)
    [check] = await checks_of(units, record.id)
    assert (check.error_code, check.http_status) == (None, 200)
    assert probes_stay_confined.attempts == ["127.0.0.1"]
