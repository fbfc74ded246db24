"""The probe port: the real `ProbeClient` against a local HTTP server and `MemoryProbe` answer alike
(statuses and bodies, what the request carries, redirects, the body cap, timeouts, nothing listening,
DNS, the address guard on every resolved address, and the URL rules, before anything is sent)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from signal_watcher.adapters.memory import MemoryProbe
from signal_watcher.adapters.probe_client import MAX_BODY_BYTES, ProbeClient
from signal_watcher.domain.errors import NetworkConfined, UrlRefused
from signal_watcher.domain.model import Header
from signal_watcher.domain.probes import ProbeFailed
from signal_watcher.domain.ssrf import check_url
from signal_watcher.service_layer.ports import Probe
from tests.support.fixture_server import FixtureServer
from tests.support.signal_watcher_fixtures import FIXTURE_HOST, LOOPBACK_FOR_TESTS, fake_resolver

NAMES = {
    FIXTURE_HOST: ["127.0.0.1"],
    "private.example.com": ["10.0.0.1"],
    "mixed.example.com": ["8.8.8.8", "10.0.0.1"],
    "mapped.example.com": ["::ffff:127.0.0.1"],  # matched as IPv6: the IPv4 allow-list does not open it
    "cgnat.example.com": ["100.64.0.1"],
    "public.example.com": ["93.184.216.34"],  # public: the SSRF rule admits it, the confinement does not
    "public6.example.com": ["2606:4700::1111"],
    "half.example.com": ["127.0.0.1", "93.184.216.34"],
}
FAKE_PORT = 8080


class Site:
    """Where the probe under test goes: URLs of the fixture server's routes (see fixture_server.py)."""

    probe: Probe

    def url(self, path: str, host: str = FIXTURE_HOST) -> str:
        raise NotImplementedError

    def text(self, value: str, status: int = 200) -> str:
        raise NotImplementedError

    def closed(self) -> str:
        raise NotImplementedError

    def requests(self, path: str) -> int:
        raise NotImplementedError


@dataclass
class ServerSite(Site):
    probe: ProbeClient
    server: FixtureServer

    def url(self, path: str, host: str = FIXTURE_HOST) -> str:
        return self.server.url(host, path)

    def text(self, value: str, status: int = 200) -> str:
        self.server.state.update(text=value, status=status)
        return self.url("/text")

    def closed(self) -> str:
        return f"http://{FIXTURE_HOST}:9/"  # discard: nothing listens on the loopback

    def requests(self, path: str) -> int:
        return self.server.requests[path]


@dataclass
class MemorySite(Site):
    probe: MemoryProbe

    def url(self, path: str, host: str = FIXTURE_HOST) -> str:
        """The fake told to answer `path` as the fixture server's route of that name does."""
        url = f"http://{host}:{FAKE_PORT}{path}"
        kind, _, number = path.lstrip("/").partition("/")
        if kind == "status":
            self.probe.answer(url, status=int(number))
        elif kind == "body":
            self.probe.answer(url, body=b"x" * int(number))
        elif kind == "redirect":
            self.probe.answer(url, status=302)
        elif kind == "hang":
            self.probe.fail(url, "timeout")
        elif kind == "echo":
            self.probe.echo(url)
        return url

    def text(self, value: str, status: int = 200) -> str:
        url = f"http://{FIXTURE_HOST}:{FAKE_PORT}/text"
        self.probe.answer(url, status=status, body=value.encode())
        return url

    def closed(self) -> str:
        return f"http://{FIXTURE_HOST}:9/"

    def requests(self, path: str) -> int:
        return sum(n for url, n in self.probe.requests.items() if url.endswith(f":{FAKE_PORT}{path}"))


async def failure(probe: Probe, url: str) -> str:
    with pytest.raises(ProbeFailed) as failed:
        await probe.probe("GET", url, [], None)
    return failed.value.code


class ProbeContract:
    @pytest.fixture
    async def site(self) -> Site:
        raise NotImplementedError

    async def test_the_guard_is_the_one_given(self, site: Site) -> None:
        assert site.probe.guard == LOOPBACK_FOR_TESTS

    @pytest.mark.parametrize("status", [200, 204, 404, 500, 503])
    async def test_any_completed_non_redirect_status_is_returned(self, site: Site, status: int) -> None:
        response = await site.probe.probe("GET", site.url(f"/status/{status}"), [], None)
        assert (response.status_code, response.body) == (status, b"")

    async def test_the_body_is_returned_as_sent(self, site: Site) -> None:
        response = await site.probe.probe("GET", site.text("héllo", status=201), [], None)
        assert (response.status_code, response.body) == (201, "héllo".encode())
        assert response.duration_ms >= 0

    async def test_the_request_carries_method_headers_and_body(self, site: Site) -> None:
        response = await site.probe.probe("POST", site.url("/echo"), [Header("X-Token", "t0k")], '{"a": 1}')
        echo = json.loads(response.body)
        assert (echo["method"], echo["headers"]["x-token"], echo["body"]) == ("POST", "t0k", '{"a": 1}')

    async def test_a_redirect_is_a_failure_and_not_followed(self, site: Site) -> None:
        assert await failure(site.probe, site.url("/redirect")) == "redirect"
        assert site.requests("/") == 0

    async def test_exactly_one_mebibyte_is_accepted_and_one_byte_more_is_too_large(self, site: Site) -> None:
        accepted = await site.probe.probe("GET", site.url(f"/body/{MAX_BODY_BYTES}"), [], None)
        assert len(accepted.body) == MAX_BODY_BYTES
        assert await failure(site.probe, site.url(f"/body/{MAX_BODY_BYTES + 1}")) == "too_large"

    async def test_a_hanging_target_times_out(self, site: Site) -> None:
        assert await failure(site.probe, site.url("/hang")) == "timeout"

    async def test_nothing_listening_is_connect_refused(self, site: Site) -> None:
        assert await failure(site.probe, site.closed()) == "connect_refused"

    async def test_a_name_that_does_not_resolve_is_dns(self, site: Site) -> None:
        url = site.url("/echo", host="unknown.example.com")
        assert await failure(site.probe, url) == "dns"
        with pytest.raises(ProbeFailed) as failed:
            await site.probe.preflight(url)
        assert failed.value.code == "dns"

    @pytest.mark.parametrize(
        "host", ["private.example.com", "mixed.example.com", "mapped.example.com", "cgnat.example.com"]
    )
    async def test_every_resolved_address_is_checked_before_anything_is_sent(
        self, site: Site, host: str
    ) -> None:
        url = site.url("/echo", host=host)
        assert await failure(site.probe, url) == "ssrf_blocked"
        with pytest.raises(ProbeFailed) as failed:
            await site.probe.preflight(url)
        assert failed.value.code == "ssrf_blocked"
        assert site.requests("/echo") == 0

    @pytest.mark.parametrize("host", ["public.example.com", "public6.example.com", "half.example.com"])
    async def test_a_name_resolving_outside_the_confinement_is_refused_before_anything_is_sent(
        self, site: Site, host: str
    ) -> None:
        url = site.url("/echo", host=host)
        assert await failure(site.probe, url) == "probe_network_confined"
        with pytest.raises(ProbeFailed) as failed:
            await site.probe.preflight(url)
        assert failed.value.code == "probe_network_confined"
        assert site.requests("/echo") == 0

    @pytest.mark.parametrize("literal", ["93.184.216.34", "8.8.8.8", "128.0.0.1"])
    async def test_a_public_literal_is_refused_by_the_confinement_before_anything_is_resolved_or_sent(
        self, site: Site, literal: str
    ) -> None:
        url = site.url("/echo").replace(FIXTURE_HOST, literal)
        assert await failure(site.probe, url) == "probe_network_confined"
        with pytest.raises(NetworkConfined):
            await site.probe.preflight(url)
        assert site.requests("/echo") == 0

    async def test_an_allowed_name_passes_the_preflight(self, site: Site) -> None:
        await site.probe.preflight(site.url("/echo"))
        assert site.requests("/echo") == 0  # the preflight only resolves

    @pytest.mark.parametrize(
        "url",
        [
            "http://127.1/",
            "http://0x7f000001/",
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://[::1]/",
            "http://localhost/",
            "http://db.internal/",
            "ftp://example.com/",
            f"http://{FIXTURE_HOST}:65536/",
            "http://user:pw@example.com/",
        ],
    )
    async def test_the_url_rules_hold_before_anything_is_resolved_or_sent(self, site: Site, url: str) -> None:
        assert await failure(site.probe, url) == "url_refused"
        with pytest.raises(UrlRefused) as refused:
            await site.probe.preflight(url)
        with pytest.raises(UrlRefused) as rule:
            check_url(url, LOOPBACK_FOR_TESTS)
        assert (type(refused.value), refused.value.code) == (type(rule.value), rule.value.code)


class TestProbeClient(ProbeContract):
    @pytest.fixture
    async def site(self, fixture_server: FixtureServer) -> AsyncIterator[Site]:
        client = ProbeClient(
            resolver=fake_resolver(NAMES), guard=LOOPBACK_FOR_TESTS, read_timeout_seconds=0.3
        )
        yield ServerSite(client, fixture_server)
        await client.aclose()


class TestMemoryProbe(ProbeContract):
    @pytest.fixture
    async def site(self) -> Site:
        return MemorySite(MemoryProbe(guard=LOOPBACK_FOR_TESTS, names=NAMES))
