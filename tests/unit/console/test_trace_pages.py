"""The trace pages and links, against a fake Jaeger query API on loopback: who may see them, what an id that
is no trace id gets, and that Jaeger unset, away or without the trace never breaks a page."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi import FastAPI, Request, Response

from tests.support.served_app import serve_app
from tests.support.stack import free_port
from tests.unit.console.conftest import ClientFactory, signed_in

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
DEVICE_ID = "6f1d4c2a-8e0b-4d57-9a3c-2b7e5f1a0c9d"
T0 = 1_700_000_000_000_000


def jaeger_trace(trace_id: str) -> dict[str, Any]:
    def span(span_id: str, parent: str | None, start: int, duration: int, process: str, **tags: Any) -> Any:
        references = [{"refType": "CHILD_OF", "traceID": trace_id, "spanID": parent}] if parent else []
        return {"traceID": trace_id, "spanID": span_id, "operationName": f"op-{span_id}",
                "references": references, "startTime": T0 + start, "duration": duration, "processID": process,
                "tags": [{"key": k, "type": "string", "value": v} for k, v in tags.items()]}  # fmt: skip

    return {
        "traceID": trace_id,
        "spans": [
            span("a1", None, 0, 9000, "p1", **{"yovision.device_id": DEVICE_ID}),
            span(
                "b2",
                "a1",
                1000,
                2000,
                "p2",
                **{"otel.status_code": "ERROR", "url.full": "http://x/?t=SECRET"},
            ),
        ],
        "processes": {"p1": {"serviceName": "sense-reconciler"}, "p2": {"serviceName": "bell-receiver"}},
    }


@dataclass
class FakeJaeger:
    traces: dict[str, dict[str, Any]] = field(default_factory=dict)
    searches: list[dict[str, str]] = field(default_factory=list)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/api/traces/{trace_id}")
        async def one(trace_id: str) -> Response:
            if trace_id not in self.traces:
                return Response(json.dumps({"data": None, "errors": [{"code": 404}]}), 404)
            return Response(json.dumps({"data": [self.traces[trace_id]]}), media_type="application/json")

        @app.get("/api/traces")
        async def search(request: Request) -> Any:
            self.searches.append(dict(request.query_params))
            return {"data": list(self.traces.values())}

        return app


@pytest.fixture
async def jaeger(console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeJaeger]:
    fake = FakeJaeger()
    async with serve_app(fake.app()) as port:
        monkeypatch.setenv("CONSOLE_JAEGER_URL", f"http://127.0.0.1:{port}")
        yield fake


async def test_the_waterfall_of_a_trace_draws_one_row_per_span_and_no_unlisted_attribute(
    jaeger: FakeJaeger, client_for: ClientFactory
) -> None:
    jaeger.traces[TRACE_ID] = jaeger_trace(TRACE_ID)
    client = client_for()
    await signed_in(client, "alice", "bell:audit-read")
    page = await client.get(f"/traces/{TRACE_ID.upper()}")
    assert page.status_code == 200
    assert page.text.count('class="span-row') == 2 and 'class="span-row error"' in page.text
    assert 'data-span-id="a1" data-depth="0"' in page.text and 'data-span-id="b2" data-depth="1"' in page.text
    assert DEVICE_ID in page.text and "SECRET" not in page.text and "url.full" not in page.text
    assert "style=" not in page.text and "<script>" not in page.text


async def test_traces_need_the_audit_permission_and_an_id_is_never_echoed(
    jaeger: FakeJaeger, client_for: ClientFactory
) -> None:
    client = client_for()
    await signed_in(client, "bob", "sense:operate")
    refused = await client.get(f"/traces/{TRACE_ID}")
    assert refused.status_code == 403 and "bell:audit-read" in refused.text
    reader = client_for(host="localhost")
    await signed_in(reader, "carol", "bell:audit-read")
    for bad in ("not-a-trace-id", "%3Cb%3Ebold%3C!b%3E", "0" * 32, "a" * 33):
        answer = await reader.get(f"/traces/{bad}")
        assert answer.status_code == 400 and "invalid_trace_id" in answer.text, bad
        assert "<b>bold" not in answer.text and "not-a-trace-id" not in answer.text


async def test_a_trace_jaeger_lacks_or_a_jaeger_away_is_a_message_not_an_error(
    jaeger: FakeJaeger, client_for: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = client_for()
    await signed_in(client, "alice", "bell:audit-read")
    missing = await client.get(f"/traces/{TRACE_ID}")
    assert missing.status_code == 200 and "Jaeger has no trace of this id" in missing.text
    monkeypatch.setenv("CONSOLE_JAEGER_URL", f"http://127.0.0.1:{free_port()}")
    away = client_for(host="localhost")
    await signed_in(away, "alice", "bell:audit-read")
    page = await away.get(f"/traces/{TRACE_ID}")
    assert page.status_code == 200 and "jaeger_unavailable" in page.text


async def test_without_jaeger_there_is_no_trace_page(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    client = client_for()
    await signed_in(client, "alice", "bell:audit-read")
    answer = await client.get(f"/traces/{secrets.token_hex(16)}")
    assert answer.status_code == 404 and "tracing_not_configured" in answer.text


def services_app() -> FastAPI:
    """Sense's device and Bell's audit page, one row with a trace id, one without (a row stored earlier)."""
    app = FastAPI()

    @app.get("/v1/devices/{device_id}")
    async def device(device_id: str) -> Any:
        return {"id": device_id, "name": "cam", "desired_state": "enabled"}

    @app.get("/v1/devices/{device_id}/reconcile-status")
    async def status(device_id: str) -> Any:
        return {"device_id": device_id, "status": "converged"}

    @app.get("/v1/audit-events")
    async def audit() -> Any:
        row = {"event_id": "e1", "source_system": "sense", "action": "device.created", "fact": {}}
        return {"items": [{**row, "trace_id": TRACE_ID}, {**row, "event_id": "e2"}], "next_cursor": None}

    return app


@pytest.fixture
async def services(console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    async with serve_app(services_app()) as port:
        for setting in ("SENSE_URL", "BELL_URL"):
            monkeypatch.setenv(f"CONSOLE_{setting}", f"http://127.0.0.1:{port}")
        yield


async def test_a_device_lists_its_traces_and_an_audit_row_links_its_trace(
    services: None, jaeger: FakeJaeger, client_for: ClientFactory
) -> None:
    jaeger.traces[TRACE_ID] = jaeger_trace(TRACE_ID)
    client = client_for()
    await signed_in(client, "alice", "sense:operate", "bell:audit-read")
    device = await client.get(f"/devices/{DEVICE_ID}")
    assert device.status_code == 200 and device.text.count(f'href="/traces/{TRACE_ID}"') == 1
    [search] = jaeger.searches
    assert search["service"] == "sense-reconciler"
    assert json.loads(search["tags"]) == {"yovision.device_id": DEVICE_ID}
    audit = await client.get("/audit")
    assert audit.status_code == 200 and audit.text.count(f'href="/traces/{TRACE_ID}"') == 1


async def test_no_trace_link_without_the_permission_or_without_jaeger(
    services: None, jaeger: FakeJaeger, client_for: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    jaeger.traces[TRACE_ID] = jaeger_trace(TRACE_ID)
    operator = client_for()
    await signed_in(operator, "bob", "sense:operate")
    page = await operator.get(f"/devices/{DEVICE_ID}")
    assert page.status_code == 200 and "/traces/" not in page.text and not jaeger.searches
    monkeypatch.delenv("CONSOLE_JAEGER_URL", raising=False)
    reader = client_for(host="localhost")
    await signed_in(reader, "alice", "sense:operate", "bell:audit-read")
    for path in (f"/devices/{DEVICE_ID}", "/audit"):
        page = await reader.get(path)
        assert page.status_code == 200 and "/traces/" not in page.text and "Traces" not in page.text, path
