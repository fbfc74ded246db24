"""The operator allow-list (SIGNAL_PROBE_ALLOWED_NETWORKS): allowed addresses pass at create and at connect
time, everything outside it is still refused, DNS rebinding included, and the default refuses loopback."""

from __future__ import annotations

import ipaddress
import json
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.domain.probes import ProbeFailed
from signal_watcher.domain.ssrf import STRICT_GUARD, AddressGuard, IpAddress
from signal_watcher.entrypoints.api import openapi_document
from tests.support.fixture_server import FixtureServer
from tests.support.signal_watcher_fixtures import (
    LOOPBACK_FOR_TESTS,
    LOOPBACK_NETWORK,
    Bearer,
    api_client,
    check_now,
    use_cases_on,
)
from tests.support.stack import problem_code
from yovision_platform.messaging import AvroSerde

ALICE = Bearer("alice")


def _body(url: str) -> dict[str, object]:
    return {"name": "w", "agent_id": "a", "url": url, "method": "GET", "prompt_template": "{diff}"}


def _app(units: PostgresUnitsOfWork, probe: ProbeClient) -> httpx.AsyncClient:
    return api_client(units, probe)


@pytest.fixture
async def allowing_probe() -> AsyncIterator[ProbeClient]:
    """The production wiring with SIGNAL_PROBE_ALLOWED_NETWORKS=127.0.0.0/8: the system resolver."""
    client = ProbeClient(guard=LOOPBACK_FOR_TESTS)
    yield client
    await client.aclose()


async def test_an_allowed_loopback_literal_is_accepted_at_create_and_probed_at_connect_time(
    fixture_server: FixtureServer,
    units: PostgresUnitsOfWork,
    serde: AvroSerde,
    allowing_probe: ProbeClient,
) -> None:
    fixture_server.state["text"] = "v1"
    url = fixture_server.url("127.0.0.1", "/text")
    async with _app(units, allowing_probe) as api:
        created = await api.post("/v1/signal-watchers", json=_body(url), headers=ALICE)
        assert created.status_code == 201, created.text
        tested = await api.post(f"/v1/signal-watchers/{created.json()['id']}/test", headers=ALICE)
    assert (tested.json()["ok"], tested.json()["sample"]) == (True, "v1")
    runner = use_cases_on(units, allowing_probe).check_runner
    decision = await check_now(units, runner, uuid.UUID(created.json()["id"]))
    assert decision is not None and decision.error_code is None
    assert fixture_server.requests["/text"] == 2
    shown = created.text + tested.text + json.dumps(openapi_document("0"))
    assert str(LOOPBACK_NETWORK) not in shown and "allowed_networks" not in shown  # never shown to users


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://10.1.2.3/", "ssrf_blocked_address"),
        ("http://169.254.169.254/latest/meta-data", "ssrf_blocked_address"),
        ("http://localhost:8080/", "ssrf_blocked_name"),
        ("http://[::1]/", "ssrf_ipv6_literal"),
        ("http://private.example.com/", "ssrf_blocked_address"),
    ],
)
async def test_addresses_and_names_outside_the_list_are_still_refused_at_create(
    units: PostgresUnitsOfWork, url: str, code: str
) -> None:
    async def resolve(host: str, port: int) -> list[IpAddress]:
        return [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("10.0.0.1")]

    probe = ProbeClient(resolver=resolve, guard=LOOPBACK_FOR_TESTS)
    try:
        async with _app(units, probe) as api:
            response = await api.post("/v1/signal-watchers", json=_body(url), headers=ALICE)
    finally:
        await probe.aclose()
    assert (response.status_code, problem_code(response)) == (403, code)


async def test_rebinding_to_an_address_outside_the_list_is_refused_at_connect_time(
    fixture_server: FixtureServer,
) -> None:
    answers = iter([["127.0.0.1"], ["10.0.0.1"], ["127.0.0.1", "192.168.1.1"]])

    async def rebinding(host: str, port: int) -> list[IpAddress]:
        return [ipaddress.ip_address(a) for a in next(answers)]

    probe = ProbeClient(resolver=rebinding, guard=LOOPBACK_FOR_TESTS)
    url = fixture_server.url("rebind.example.com", "/echo")
    try:
        await probe.preflight(url)  # allowed at create time
        for _ in range(2):
            with pytest.raises(ProbeFailed) as exc:
                await probe.probe("GET", url, [], None)
            assert exc.value.code == "ssrf_blocked"
    finally:
        await probe.aclose()
    assert fixture_server.requests["/echo"] == 0


async def test_the_default_guard_refuses_loopback_by_literal_and_by_name(
    fixture_server: FixtureServer, units: PostgresUnitsOfWork
) -> None:
    assert ProbeClient().guard == STRICT_GUARD == AddressGuard()
    probe = ProbeClient()
    try:
        async with _app(units, probe) as api:
            literal = await api.post(
                "/v1/signal-watchers", json=_body(fixture_server.url("127.0.0.1", "/text")), headers=ALICE
            )
        with pytest.raises(ProbeFailed) as exc:
            await probe.probe("GET", fixture_server.url("127.0.0.1", "/text"), [], None)
    finally:
        await probe.aclose()
    assert (literal.status_code, problem_code(literal)) == (403, "ssrf_blocked_address")
    assert exc.value.code == "url_refused"
    assert fixture_server.requests["/text"] == 0
