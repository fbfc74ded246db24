from __future__ import annotations

import asyncio
import json

import pytest

from signal_watcher.adapters import probe_client as probe_module
from signal_watcher.adapters.probe_client import MAX_BODY_BYTES, ProbeClient, ProbeFailed
from signal_watcher.domain.model import Header
from signal_watcher.domain.ssrf import STRICT_GUARD
from tests.integration.signal_watcher.conftest import FIXTURE_HOST, LOOPBACK_FOR_TESTS, fake_resolver
from tests.integration.signal_watcher.fixture_server import FixtureServer


async def _failure(client: ProbeClient, url: str, method: str = "GET") -> str:
    with pytest.raises(ProbeFailed) as exc:
        await client.probe(method, url, [], None)
    return exc.value.code


async def test_connects_to_the_checked_address_and_keeps_the_host_header(
    fixture_server: FixtureServer, local_probe: ProbeClient
) -> None:
    response = await local_probe.probe(
        "POST", fixture_server.url(FIXTURE_HOST, "/echo"), [Header("X-Token", "t0k")], '{"a": 1}'
    )
    echo = json.loads(response.body)
    assert response.status_code == 200
    assert echo["method"] == "POST"
    assert echo["headers"]["host"] == f"{FIXTURE_HOST}:{fixture_server.port}"
    assert echo["headers"]["x-token"] == "t0k"
    assert echo["body"] == '{"a": 1}'


async def test_a_name_resolving_to_loopback_is_refused_by_the_strict_guard(
    fixture_server: FixtureServer,
) -> None:
    client = ProbeClient(resolver=fake_resolver({FIXTURE_HOST: ["127.0.0.1"]}), guard=STRICT_GUARD)
    try:
        assert await _failure(client, fixture_server.url(FIXTURE_HOST, "/echo")) == "ssrf_blocked"
    finally:
        await client.aclose()
    assert fixture_server.requests["/echo"] == 0


@pytest.mark.parametrize(
    "answer", [["8.8.8.8", "127.0.0.1"], ["10.0.0.1"], ["::ffff:127.0.0.1"], ["100.64.0.1"]]
)
async def test_every_resolved_address_is_checked(fixture_server: FixtureServer, answer: list[str]) -> None:
    client = ProbeClient(resolver=fake_resolver({"rebind.example.com": answer}))
    try:
        assert await _failure(client, fixture_server.url("rebind.example.com", "/echo")) == "ssrf_blocked"
    finally:
        await client.aclose()


async def test_a_name_that_rebinds_after_creation_is_refused_at_probe_time(
    fixture_server: FixtureServer,
) -> None:
    answers = iter([["93.184.216.34"], ["127.0.0.1"]])

    async def rebinding(host: str, port: int):  # type: ignore[no-untyped-def]
        return await fake_resolver({host: next(answers)})(host, port)

    client = ProbeClient(resolver=rebinding)
    try:
        await client.preflight("http://rebind.example.com/")  # public at create time
        assert await _failure(client, fixture_server.url("rebind.example.com", "/echo")) == "ssrf_blocked"
    finally:
        await client.aclose()


async def test_unresolvable_name_is_a_dns_failure(local_probe: ProbeClient) -> None:
    assert await _failure(local_probe, "http://unknown.example.com/") == "dns"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.1/",
        "http://0x7f000001/",
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://[::1]/",
        "http://localhost/",
    ],
)
async def test_literal_and_local_urls_are_refused_before_connecting_even_with_the_test_guard(
    local_probe: ProbeClient, url: str
) -> None:
    assert await _failure(local_probe, url) == "url_refused"


@pytest.mark.parametrize("path", ["/body/{n}", "/chunked/{n}"])
async def test_exactly_one_mebibyte_is_accepted(
    fixture_server: FixtureServer, local_probe: ProbeClient, path: str
) -> None:
    url = fixture_server.url(FIXTURE_HOST, path.format(n=MAX_BODY_BYTES))
    assert len((await local_probe.probe("GET", url, [], None)).body) == MAX_BODY_BYTES


@pytest.mark.parametrize("path", ["/body/{n}", "/chunked/{n}", "/endless"])
async def test_one_byte_over_the_cap_or_endless_is_too_large(
    fixture_server: FixtureServer, local_probe: ProbeClient, path: str
) -> None:
    url = fixture_server.url(FIXTURE_HOST, path.format(n=MAX_BODY_BYTES + 1))
    assert await _failure(local_probe, url) == "too_large"


async def test_endless_stream_connection_is_dropped_at_the_cap(
    fixture_server: FixtureServer, local_probe: ProbeClient
) -> None:
    assert await _failure(local_probe, fixture_server.url(FIXTURE_HOST, "/endless")) == "too_large"
    for _ in range(50):
        if fixture_server.aborted:
            break
        await asyncio.sleep(0.05)
    assert fixture_server.aborted == ["/endless"]


async def test_redirects_are_failures_not_followed(
    fixture_server: FixtureServer, local_probe: ProbeClient
) -> None:
    assert await _failure(local_probe, fixture_server.url(FIXTURE_HOST, "/redirect")) == "redirect"
    assert fixture_server.requests["/"] == 0


@pytest.mark.parametrize("status", [200, 204, 404, 500, 503])
async def test_any_completed_non_redirect_status_is_returned(
    fixture_server: FixtureServer, local_probe: ProbeClient, status: int
) -> None:
    assert (
        await local_probe.probe("GET", fixture_server.url(FIXTURE_HOST, f"/status/{status}"), [], None)
    ).status_code == status


async def test_hanging_server_times_out(fixture_server: FixtureServer) -> None:
    client = ProbeClient(
        resolver=fake_resolver({FIXTURE_HOST: ["127.0.0.1"]}),
        guard=LOOPBACK_FOR_TESTS,
        read_timeout_seconds=0.3,
    )
    try:
        assert await _failure(client, fixture_server.url(FIXTURE_HOST, "/hang")) == "timeout"
    finally:
        await client.aclose()


async def test_refused_connection_has_its_code() -> None:
    client = ProbeClient(resolver=fake_resolver({FIXTURE_HOST: ["127.0.0.1"]}), guard=LOOPBACK_FOR_TESTS)
    try:
        assert await _failure(client, f"http://{FIXTURE_HOST}:9/") == "connect_refused"
    finally:
        await client.aclose()


def test_limits_match_the_spec() -> None:
    assert probe_module.CONNECT_TIMEOUT_SECONDS == 10.0
    assert probe_module.READ_TIMEOUT_SECONDS == 15.0
    assert MAX_BODY_BYTES == 1_048_576
