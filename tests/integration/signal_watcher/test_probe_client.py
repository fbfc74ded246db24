"""The real probe client only: the connect-time details the fake does not model (the Host header of the
checked address, a name that rebinds between create and probe, bodies without a length, the connection
dropped at the cap). What both answer alike is proven by tests/ports/signal_watcher/test_probe.py."""

from __future__ import annotations

import asyncio
import json

import pytest

from signal_watcher.adapters import probe_client as probe_module
from signal_watcher.adapters.probe_client import MAX_BODY_BYTES, MAX_KEEPALIVE_CONNECTIONS, ProbeClient
from signal_watcher.domain.model import Header
from signal_watcher.domain.probes import ProbeFailed
from tests.support.fixture_server import FixtureServer
from tests.support.signal_watcher_fixtures import CONFINED_STRICT_GUARD, FIXTURE_HOST, fake_resolver


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
    client = ProbeClient(resolver=fake_resolver({FIXTURE_HOST: ["127.0.0.1"]}), guard=CONFINED_STRICT_GUARD)
    try:
        assert await _failure(client, fixture_server.url(FIXTURE_HOST, "/echo")) == "ssrf_blocked"
    finally:
        await client.aclose()
    assert fixture_server.requests["/echo"] == 0


async def test_a_name_that_rebinds_after_creation_is_refused_at_probe_time(
    fixture_server: FixtureServer,
) -> None:
    answers = iter([["93.184.216.34"], ["127.0.0.1"]])

    async def rebinding(host: str, port: int):  # type: ignore[no-untyped-def]
        return await fake_resolver({host: next(answers)})(host, port)

    # Not confined: its answer at create time is public. Nothing connects (the conftest's fence would refuse).
    client = ProbeClient(resolver=rebinding)
    try:
        await client.preflight("http://rebind.example.com/")  # public at create time
        assert await _failure(client, fixture_server.url("rebind.example.com", "/echo")) == "ssrf_blocked"
    finally:
        await client.aclose()


@pytest.mark.parametrize("path", ["/chunked/{n}"])
async def test_exactly_one_mebibyte_is_accepted_without_a_length(
    fixture_server: FixtureServer, local_probe: ProbeClient, path: str
) -> None:
    url = fixture_server.url(FIXTURE_HOST, path.format(n=MAX_BODY_BYTES))
    assert len((await local_probe.probe("GET", url, [], None)).body) == MAX_BODY_BYTES


@pytest.mark.parametrize("path", ["/chunked/{n}", "/endless"])
async def test_one_byte_over_the_cap_without_a_length_or_endless_is_too_large(
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


def test_limits_match_the_spec() -> None:
    assert probe_module.CONNECT_TIMEOUT_SECONDS == 10.0
    assert probe_module.READ_TIMEOUT_SECONDS == 15.0
    assert MAX_BODY_BYTES == 1_048_576


async def test_the_pool_keeps_at_most_the_kept_number_of_idle_connections(local_probe: ProbeClient) -> None:
    """More probes at once than the pool keeps: each gets its own connection (the server answers none before
    all arrived); once all are answered, the connections beyond MAX_KEEPALIVE_CONNECTIONS are closed."""
    probes = MAX_KEEPALIVE_CONNECTIONS + 5
    arrived, connected = 0, 0
    all_arrived, hung_up = asyncio.Event(), asyncio.Event()

    async def answer_when_all_arrived(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal arrived, connected
        connected += 1
        try:
            await reader.readuntil(b"\r\n\r\n")
            arrived += 1
            if arrived == probes:
                all_arrived.set()
            await all_arrived.wait()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
            await reader.read()  # b"" once the client closes the connection
        finally:
            connected -= 1
            hung_up.set()
            writer.close()

    server = await asyncio.start_server(answer_when_all_arrived, "127.0.0.1", 0)
    url = f"http://{FIXTURE_HOST}:{server.sockets[0].getsockname()[1]}/"
    try:
        responses = await asyncio.gather(*(local_probe.probe("GET", url, [], None) for _ in range(probes)))
        assert [r.status_code for r in responses] == [200] * probes
        async with asyncio.timeout(5):
            while connected > MAX_KEEPALIVE_CONNECTIONS:
                hung_up.clear()
                await hung_up.wait()
        assert connected == MAX_KEEPALIVE_CONNECTIONS == 20  # the rest stay kept for reuse
    finally:
        await local_probe.aclose()
        server.close()
        await server.wait_closed()
