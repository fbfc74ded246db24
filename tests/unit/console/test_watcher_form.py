"""The watcher form's "Test" (create and edit): the form's definition goes to signal-watcher's
`POST /v1/signal-watchers:test` with the signed-in user's token, and the page shows the judged value, or the
stable code and its meaning, without saving. Without JavaScript it is a normal form post that renders the
form again with the result; with htmx only the result. CSRF as on every form; typed secrets never rendered.

signal-watcher is a small fake served on loopback (`serve_app`), which records what the console sent."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from console.domain.watcher_form import CODE_MEANINGS, MASK, field_of, meaning_of
from tests.support.served_app import serve_app
from tests.unit.console.conftest import ClientFactory, signed_in

SECRET = f"hv-{uuid.uuid4().hex}"
WATCHER_ID = str(uuid.uuid4())
JUDGED = {
    "ok": True,
    "error_code": None,
    "http_status": 200,
    "duration_ms": 12,
    "value_hash": "ab" * 32,
    "value_excerpt": "41.5",
    "would_change": False,
    "is_baseline": True,
    "sample": '{"price": 41.5}',
}
STORED = {
    "id": WATCHER_ID, "name": "price", "agent_id": "agent-7", "url": "https://shop.example.com/p",
    "method": "GET", "headers": [{"key": "Authorization", "value": MASK}], "body_length": None,
    "interval_minutes": 15, "compare_mode": "JSON_FIELD", "json_path": "price",
    "prompt_template": "{diff}", "status": "ACTIVE",
}  # fmt: skip


@dataclass
class FakeSignal:
    """signal-watcher's test endpoint and watcher read: answers `answer` and records every request."""

    answer: tuple[int, dict[str, Any]] = (200, JUDGED)
    tests: list[dict[str, Any]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/signal-watchers:test")
        async def test(request: Request) -> JSONResponse:
            self.calls.append("POST /v1/signal-watchers:test")
            self.tests.append(
                {
                    "body": await request.json(),
                    "query": dict(request.query_params),
                    "authorization": request.headers.get("authorization", ""),
                }
            )
            status, body = self.answer
            return JSONResponse(body, status_code=status)

        @app.get("/v1/signal-watchers/{watcher_id}")
        async def get(watcher_id: str) -> dict[str, Any]:
            self.calls.append(f"GET /v1/signal-watchers/{watcher_id}")
            return STORED

        return app


@pytest.fixture
async def signal(console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeSignal]:
    fake = FakeSignal()
    async with serve_app(fake.app()) as port:
        monkeypatch.setenv("CONSOLE_SIGNAL_URL", f"http://127.0.0.1:{port}")
        yield fake


def form(csrf: str, **changes: str) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "csrf": csrf,
        "name": "price",
        "agent_id": "agent-7",
        "url": "https://shop.example.com/p",
        "method": "GET",
        "header_key": ["Authorization", ""],
        "header_value": [SECRET, ""],
        "interval_minutes": "15",
        "compare_mode": "JSON_FIELD",
        "json_path": "$.price",
        "prompt_template": "{diff}",
        "body": "",
    }
    return {**fields, **changes}


async def test_the_form_offers_a_test_button_that_works_with_and_without_javascript(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    client = client_for()
    await signed_in(client)
    page = (await client.get("/watchers/new")).text
    assert 'formaction="/watchers/new/test"' in page and 'hx-post="/watchers/new/test"' in page
    assert 'hx-target="#form-preview"' in page and '<section id="form-preview" aria-live="polite"' in page
    assert page.index(">Create watcher</button>") < page.index(">Test</button>")  # Enter still creates


async def test_without_javascript_the_form_comes_back_with_the_judged_value_and_nothing_is_saved(
    signal: FakeSignal, client_for: ClientFactory
) -> None:
    client = client_for()
    csrf = await signed_in(client, "alice")
    answer = await client.post("/watchers/new/test", data=form(csrf))
    assert answer.status_code == 200, answer.text
    html = answer.text
    assert "<h1>New watcher</h1>" in html and 'id="form-preview-result"' in html
    assert '<code class="judged-value">41.5</code>' in html and "no (first check: baseline)" in html
    assert 'value="price"' in html and 'value="$.price"' in html  # the form as it was posted
    assert "type them again before you save" in html
    assert SECRET not in html  # a typed header value is never rendered back
    assert signal.calls == ["POST /v1/signal-watchers:test"]  # tested, not created
    [sent] = signal.tests
    assert sent["body"]["json_path"] == "$.price" and sent["query"] == {}
    assert sent["body"]["headers"] == [{"key": "Authorization", "value": SECRET}]
    assert sent["authorization"].startswith("Bearer ey")  # the signed-in user's token


async def test_with_htmx_only_the_result_is_answered(signal: FakeSignal, client_for: ClientFactory) -> None:
    client = client_for()
    csrf = await signed_in(client)
    answer = await client.post(
        "/watchers/new/test", data=form(csrf), headers={"HX-Request": "true", "X-CSRF-Token": csrf}
    )
    assert answer.status_code == 200
    assert "<form" not in answer.text and "<h1>" not in answer.text
    assert answer.text.lstrip().startswith('<div class="card preview" id="form-preview-result">')
    assert "41.5" in answer.text and SECRET not in answer.text


@pytest.mark.parametrize("htmx", [False, True])
async def test_a_refused_definition_shows_its_code_its_meaning_and_the_field(
    signal: FakeSignal, client_for: ClientFactory, htmx: bool
) -> None:
    signal.answer = (422, {"status": 422, "code": "invalid_json_path", "error": "invalid_json_path"})
    client = client_for()
    csrf = await signed_in(client)
    headers = {"HX-Request": "true", "X-CSRF-Token": csrf} if htmx else {}
    answer = await client.post("/watchers/new/test", data=form(csrf, json_path="$..price"), headers=headers)
    assert answer.status_code == (200 if htmx else 422)  # htmx swaps only 2xx answers
    assert "<code>invalid_json_path</code>: " + CODE_MEANINGS["invalid_json_path"] in answer.text
    assert ('id="json_path-error"' in answer.text) is not htmx  # beside its field on the full page


async def test_a_failed_probe_shows_its_code_and_meaning(
    signal: FakeSignal, client_for: ClientFactory
) -> None:
    failed = {"ok": False, "error_code": "probe_network_confined", "value_excerpt": None}
    signal.answer = (200, {**JUDGED, **failed})
    client = client_for()
    csrf = await signed_in(client)
    answer = await client.post("/watchers/new/test", data=form(csrf))
    assert answer.status_code == 200
    assert f"<code>probe_network_confined</code>: {meaning_of('probe_network_confined')}" in answer.text
    assert ">failed</span>" in answer.text


async def test_the_edit_form_tests_the_edit_of_its_watcher(
    signal: FakeSignal, client_for: ClientFactory
) -> None:
    client = client_for()
    csrf = await signed_in(client)
    edit = form(csrf, header_value=[MASK, ""])  # the masked value as the edit page shows it
    page = (await client.get(f"/watchers/{WATCHER_ID}/edit")).text
    assert f'formaction="/watchers/{WATCHER_ID}/edit/test"' in page
    answer = await client.post(f"/watchers/{WATCHER_ID}/edit/test", data=edit)
    assert answer.status_code == 200, answer.text
    assert "<h1>Edit watcher</h1>" in answer.text and f'value="{MASK}"' in answer.text
    assert "type them again" not in answer.text  # nothing typed was dropped
    sent = signal.tests[-1]
    assert sent["query"] == {"edit_of": WATCHER_ID}
    assert sent["body"]["headers"] == [{"key": "Authorization", "value": MASK}] and "body" not in sent["body"]


async def test_a_test_without_the_sessions_csrf_token_is_refused_before_signal_watcher_is_asked(
    signal: FakeSignal, client_for: ClientFactory
) -> None:
    client = client_for()
    await signed_in(client)
    for path in ("/watchers/new/test", f"/watchers/{WATCHER_ID}/edit/test"):
        refused = await client.post(path, data=form("forged"))
        assert refused.status_code == 403 and "csrf_failed" in refused.text
    assert signal.calls == []


def test_every_code_a_test_can_answer_has_a_meaning() -> None:
    codes = {
        "timeout", "too_large", "redirect", "connect_refused", "connect_failed", "dns", "ssrf_blocked",
        "probe_network_confined", "url_refused", "tls", "protocol_error", "json_parse_error",
        "json_path_missing", "json_value_null", "probe_internal_error", "judge_internal_error",
        "invalid_json_path", "ssrf_blocked_address", "ssrf_blocked_name", "url_port_invalid",
    }  # fmt: skip
    assert codes <= set(CODE_MEANINGS)
    assert "documentation" in meaning_of("no_such_code")


@pytest.mark.parametrize(
    ("code", "field"),
    [
        ("invalid_json_path", "json_path"),
        ("json_path_requires_json_field", "json_path"),
        ("invalid_name", "name"),
        ("invalid_agent_id", "agent_id"),
        ("invalid_prompt_template", "prompt_template"),
        ("invalid_header_key", "headers"),
        ("forbidden_header", "headers"),
        ("too_many_headers", "headers"),
        ("url_port_invalid", "url"),
        ("ssrf_blocked_address", "url"),
        ("probe_network_confined", "url"),
        ("body_requires_post", "body"),
        ("watcher_limit_reached", "form"),
    ],
)
def test_each_refusal_is_shown_beside_its_field(code: str, field: str) -> None:
    assert field_of(code, ()) == {field: code}
