"""The overview lists Prometheus's alerts (`CONSOLE_PROMETHEUS_URL`): firing ones, then pending ones in a
table of their own, each with its name, severity, service (`job`), instance and since when; nothing when
there is none or no Prometheus is configured; "Prometheus unreachable" (the page still 200) when it does not
answer or answers anything but an alerts list. The fake Prometheus serves `tests.support.prometheus_server`'s
answers, which tests/integration/console proves identical to a real Prometheus's."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from console.domain.alerts import AlertState, alerts_of
from console.settings import ConsoleSettings
from tests.support.prometheus_server import alert_entry, alerts_answer
from tests.support.served_app import serve_app
from tests.support.stack import free_port
from tests.unit.console.conftest import ClientFactory, signed_in
from yovision_platform.errors import ConfigError
from yovision_platform.settings import load_settings

SENSE_LABELS = {"job": "sense-reconciler", "instance": "127.0.0.1:18081"}
STALLED = alert_entry(
    "YovisionConsumerStalled",
    "firing",
    "2026-12-06T10:05:06.331313991Z",
    {**SENSE_LABELS, "severity": "page"},
)
LAGGING = alert_entry(
    "YovisionConsumerLag", "pending", "2026-12-06T11:00:00Z", {"job": "bell-receiver", "severity": "warn"}
)
REFUSED = alert_entry(
    "YovisionMediaMtxRefusedConfig", "firing", "2026-12-06T09:00:00+01:00",
    {"job": "sense-reconciler", "media_server": "mtx-a", "severity": "warn"},
)  # fmt: skip


@dataclass
class FakePrometheus:
    answer: Response = field(default_factory=lambda: JSONResponse(alerts_answer()))
    asked: int = 0

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/api/v1/alerts")
        async def alerts() -> Response:
            self.asked += 1
            return self.answer

        return app


@pytest.fixture
async def prometheus(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[FakePrometheus]:
    fake = FakePrometheus()
    async with serve_app(fake.app()) as port:
        monkeypatch.setenv("CONSOLE_PROMETHEUS_URL", f"http://127.0.0.1:{port}/")
        yield fake


async def overview(client_for: ClientFactory) -> str:
    client = client_for()
    await signed_in(client, "alice")
    page = await client.get("/")
    assert page.status_code == 200, page.text
    return page.text


def rows(html: str, table: str) -> list[list[str]]:
    """The cells' text of each body row of the table with id `table`."""
    found = re.search(rf'<table[^>]* id="{table}">(.*?)</table>', html, re.S)
    if found is None:
        return []
    body = found.group(1).split("<tbody>")[1]
    return [
        [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    ]


def test_alerts_are_ordered_firing_first_then_by_severity_and_name_in_utc() -> None:
    found = alerts_of(alerts_answer(LAGGING, REFUSED, STALLED))
    assert [(a.name, a.state) for a in found] == [
        ("YovisionConsumerStalled", AlertState.FIRING),
        ("YovisionMediaMtxRefusedConfig", AlertState.FIRING),
        ("YovisionConsumerLag", AlertState.PENDING),
    ]
    assert str(found[1].since) == "2026-12-06 08:00:00+00:00"
    assert (found[1].service, found[1].instance, found[2].instance) == ("sense-reconciler", None, None)


@pytest.mark.parametrize(
    "answer",
    [
        {"status": "error", "errorType": "internal", "error": "x"},
        {"status": "success", "data": {}},
        {"status": "success", "data": {"alerts": [{"labels": {}, "state": "firing", "activeAt": "x"}]}},
        alerts_answer({**STALLED, "activeAt": "2026-12-06T10:05:06"}),  # no time zone
        [],
    ],
)
def test_anything_but_an_alerts_list_is_refused(answer: Any) -> None:
    with pytest.raises(ValueError, match=r"alerts answer|error|time zone|isoformat"):
        alerts_of(answer)


async def test_the_overview_lists_firing_then_pending_alerts(
    prometheus: FakePrometheus, client_for: ClientFactory
) -> None:
    prometheus.answer = JSONResponse(alerts_answer(LAGGING, REFUSED, STALLED))
    html = await overview(client_for)
    sense = "sense-reconciler"
    assert rows(html, "alerts-firing") == [
        ["YovisionConsumerStalled", "firing", "page", sense, "127.0.0.1:18081", "2026-12-06 10:05:06 UTC"],
        ["YovisionMediaMtxRefusedConfig", "firing", "warn", sense, "-", "2026-12-06 08:00:00 UTC"],
    ]
    assert rows(html, "alerts-pending") == [
        ["YovisionConsumerLag", "pending", "warn", "bell-receiver", "-", "2026-12-06 11:00:00 UTC"]
    ]
    assert "Prometheus unreachable" not in html and prometheus.asked > 0


async def test_only_pending_alerts_show_no_firing_table(
    prometheus: FakePrometheus, client_for: ClientFactory
) -> None:
    prometheus.answer = JSONResponse(alerts_answer(LAGGING))
    html = await overview(client_for)
    assert 'id="alerts-firing"' not in html and len(rows(html, "alerts-pending")) == 1


async def test_no_alert_shows_nothing(prometheus: FakePrometheus, client_for: ClientFactory) -> None:
    html = await overview(client_for)
    assert prometheus.asked > 0
    assert "alerts-" not in html and "Prometheus" not in html


@pytest.mark.parametrize(
    "answer",
    [
        PlainTextResponse("<html>proxy error</html>", status_code=502),
        JSONResponse({"status": "error", "errorType": "unavailable", "error": "x"}, status_code=503),
        PlainTextResponse("not json"),
        JSONResponse({"status": "success", "data": {"alerts": [{"state": "firing"}]}}),
    ],
)
async def test_a_bad_answer_shows_prometheus_unreachable(
    prometheus: FakePrometheus, client_for: ClientFactory, answer: Response
) -> None:
    prometheus.answer = answer
    html = await overview(client_for)
    assert 'id="alerts-unreachable"' in html and "Prometheus unreachable" in html
    assert "alerts-firing" not in html and prometheus.asked > 0


async def test_a_prometheus_that_does_not_answer_shows_unreachable(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, client_for: ClientFactory
) -> None:
    monkeypatch.setenv("CONSOLE_PROMETHEUS_URL", f"http://127.0.0.1:{free_port()}")
    assert "Prometheus unreachable" in await overview(client_for)


async def test_without_a_prometheus_the_overview_has_no_alerts(client_for: ClientFactory) -> None:
    html = await overview(client_for)
    assert "alerts-" not in html and "Prometheus" not in html


@pytest.mark.parametrize(
    ("url", "hosts", "ok"),
    [
        ("http://127.0.0.1:19090/", "[]", True),
        ("https://prometheus.example.com", "[]", True),
        ("http://prometheus.monitoring:9090", "[]", False),  # plain http off loopback
        ("http://prometheus.monitoring:9090", '["prometheus.monitoring"]', True),
        ("https://user:pw-in-url@prometheus.example.com", "[]", False),
        ("http://127.0.0.1:19090?x=1", "[]", False),
        ("ftp://127.0.0.1", "[]", False),
        ("https://" + "p" * 505 + ".com", "[]", False),  # over 512 characters
    ],
)
def test_the_prometheus_url_follows_the_rules_of_the_service_urls(
    console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, url: str, hosts: str, ok: bool
) -> None:
    monkeypatch.setenv("CONSOLE_PLAIN_HTTP_HOSTS", hosts)
    monkeypatch.setenv("CONSOLE_PROMETHEUS_URL", url)
    if ok:
        assert load_settings(ConsoleSettings).prometheus_url == url.rstrip("/")
    else:
        with pytest.raises(ConfigError) as refused:
            load_settings(ConsoleSettings)
        assert "CONSOLE_PROMETHEUS_URL" in refused.value.settings and "pw-in-url" not in str(refused.value)


def test_the_prometheus_url_is_optional(console_env: dict[str, str]) -> None:
    assert load_settings(ConsoleSettings).prometheus_url is None
