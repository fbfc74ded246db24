"""`POST /v1/signal-watchers:test` on PostgreSQL and the real probe client: a definition is probed and judged
once as test now does, writes nothing (no watcher, no check row, no outbox row), is refused as create refuses
it, is routed as its own operation (never as a `{watcher_id}`), and with `edit_of` is tested as that
watcher's update would save it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.service_layer.checks import CheckRunner
from tests.integration.signal_watcher.test_api import ALICE, BOB, watcher_body
from tests.support.fixture_server import FixtureServer
from tests.support.signal_watcher_fixtures import (
    FIXTURE_HOST,
    LOOPBACK_FOR_TESTS,
    Connections,
    api_client,
    check_now,
    fake_resolver,
)
from tests.support.stack import problem_code

PATH = "/v1/signal-watchers:test"


@pytest.fixture
async def api(units: PostgresUnitsOfWork) -> AsyncIterator[httpx.AsyncClient]:
    names = {FIXTURE_HOST: ["127.0.0.1"], "private.example.com": ["10.1.2.3"]}
    probe = ProbeClient(resolver=fake_resolver(names), guard=LOOPBACK_FOR_TESTS)
    async with api_client(units, probe) as client:
        yield client
    await probe.aclose()


async def rows(units: PostgresUnitsOfWork) -> tuple[int, int, int]:
    schema = units.schema.quoted
    return (
        await units.pool.fetchval(f"SELECT count(*) FROM {schema}.watchers"),
        await units.pool.fetchval(f"SELECT count(*) FROM {schema}.checks"),
        await units.pool.fetchval(f"SELECT count(*) FROM {schema}.outbox"),
    )


def definition(url: str, /, **changes: Any) -> dict[str, Any]:
    """A GET definition without a body, with `changes` (which may replace the URL too)."""
    return {**watcher_body(url, method="GET", body=None), **changes}


async def test_a_definition_is_probed_and_judged_once_and_nothing_is_written(
    api: httpx.AsyncClient,
    fixture_server: FixtureServer,
    units: PostgresUnitsOfWork,
    probes_stay_confined: Connections,
) -> None:
    fixture_server.state["text"] = '{"item": {"price": 42}}'
    url = fixture_server.url(FIXTURE_HOST, "/text")
    body = definition(url, compare_mode="JSON_FIELD", json_path="$.item.price")
    response = await api.post(PATH, json=body, headers=ALICE)
    assert response.status_code == 200, response.text
    preview = response.json()
    assert set(preview) == {
        "ok", "error_code", "http_status", "duration_ms", "value_hash", "value_excerpt", "would_change",
        "is_baseline", "sample",
    }  # fmt: skip  # TestResultOut, as /{watcher_id}/test answers
    assert (preview["ok"], preview["http_status"], preview["value_excerpt"]) == (True, 200, "42")
    assert (preview["is_baseline"], preview["would_change"], preview["error_code"]) == (True, False, None)
    assert fixture_server.requests["/text"] == 1 and probes_stay_confined.attempts == ["127.0.0.1"]
    assert await rows(units) == (0, 0, 0)
    assert "Bearer s3cret" not in response.text  # the definition's header values are never answered
    missing = await api.post(PATH, json={**body, "json_path": "$.item.nope"}, headers=ALICE)
    assert (missing.json()["ok"], missing.json()["error_code"]) == (False, "json_path_missing")


@pytest.mark.parametrize(
    ("changes", "status", "code"),
    [
        ({"url": "http://private.example.com/"}, 403, "ssrf_blocked_address"),
        ({"url": "http://10.0.0.1/"}, 403, "ssrf_blocked_address"),
        ({"url": "http://93.184.216.34/"}, 403, "probe_network_confined"),
        ({"url": "http://localhost/"}, 403, "ssrf_blocked_name"),
        ({"url": "ftp://example.com/"}, 422, "url_scheme_not_allowed"),
        ({"compare_mode": "JSON_FIELD", "json_path": "$..price"}, 422, "invalid_json_path"),
        ({"body": "x"}, 422, "body_requires_post"),
        ({"name": " "}, 422, "invalid_name"),
        ({"interval_minutes": "5"}, 422, "invalid_request"),
        ({"unknown": 1}, 422, "invalid_request"),
    ],
)
async def test_a_definition_is_refused_as_create_refuses_it_before_any_probe(
    api: httpx.AsyncClient,
    fixture_server: FixtureServer,
    units: PostgresUnitsOfWork,
    probes_stay_confined: Connections,
    changes: dict[str, Any],
    status: int,
    code: str,
) -> None:
    body = definition(fixture_server.url(FIXTURE_HOST, "/echo"), **changes)
    tested = await api.post(PATH, json=body, headers=ALICE)
    created = await api.post("/v1/signal-watchers", json=body, headers=ALICE)
    assert (tested.status_code, problem_code(tested)) == (status, code), tested.text
    assert (created.status_code, problem_code(created)) == (status, code)
    assert probes_stay_confined.attempts == [] and fixture_server.requests["/echo"] == 0
    assert await rows(units) == (0, 0, 0)


async def test_the_route_is_its_own_operation_and_needs_a_token(
    api: httpx.AsyncClient, fixture_server: FixtureServer
) -> None:
    body = definition(fixture_server.url(FIXTURE_HOST, "/text"))
    assert (await api.post(PATH, json=body)).status_code == 401
    got = await api.get(PATH, headers=ALICE)  # not GET /{watcher_id} with the id "signal-watchers:test"
    assert (got.status_code, problem_code(got)) == (405, "method_not_allowed")
    assert "POST" in got.headers["allow"]
    odd = await api.post("/v1/signal-watchers/:test", json=body, headers=ALICE)
    assert odd.status_code == 405  # `{watcher_id}` = ":test" has no POST: never this operation
    empty = await api.post(PATH, headers=ALICE)
    assert (empty.status_code, problem_code(empty)) == (422, "invalid_request")


async def test_an_edit_is_tested_with_the_stored_secrets_and_the_stored_baseline(
    api: httpx.AsyncClient,
    fixture_server: FixtureServer,
    units: PostgresUnitsOfWork,
    runner: CheckRunner,
) -> None:
    """The stored watcher judges the Authorization header its target receives (/echo answers the request);
    the edit sends it back masked and leaves the body out, as the console's edit form does."""
    url = fixture_server.url(FIXTURE_HOST, "/echo")
    judged = {"compare_mode": "JSON_FIELD", "json_path": "headers.authorization"}
    created = (await api.post("/v1/signal-watchers", json=watcher_body(url, **judged), headers=ALICE)).json()
    await check_now(units, runner, uuid.UUID(created["id"]))
    before = await rows(units)
    shown = (await api.get(f"/v1/signal-watchers/{created['id']}", headers=ALICE)).json()
    edit = watcher_body(url, name="renamed", headers=shown["headers"], **judged)  # masked, as shown
    del edit["body"]  # left out: the stored body
    params = {"edit_of": created["id"]}

    async def preview(body: dict[str, Any]) -> dict[str, Any]:
        response = await api.post(PATH, json=body, params=params, headers=ALICE)
        assert response.status_code == 200, response.text
        return dict(response.json())

    same = await preview(edit)
    assert (same["ok"], same["value_excerpt"]) == (True, "Bearer s3cret")  # the stored value was sent
    assert (same["is_baseline"], same["would_change"]) == (False, False)  # a rename keeps the baseline
    kept_body = await preview({**edit, "json_path": "body"})  # a judging edit: the baseline resets
    assert (kept_body["value_excerpt"], kept_body["is_baseline"]) == ("p4yload", True)
    new_body = await preview({**edit, "json_path": "body", "body": "other"})
    assert new_body["value_excerpt"] == "other"
    assert await rows(units) == before
    refusals = [
        (await api.post(PATH, json=edit, params=params, headers=BOB), "not_found"),
        (await api.post(PATH, json=edit, params={"edit_of": str(uuid.uuid4())}, headers=ALICE), "not_found"),
        (await api.post(PATH, json={**edit, "method": "GET"}, params=params, headers=ALICE), None),
        (await api.post(PATH, json=edit, params={"edit_of": "nope"}, headers=ALICE), "invalid_request"),
    ]
    for response, code in refusals:
        assert problem_code(response) == (code or "stored_body_requires_post")
        assert "s3cret" not in response.text and "p4yload" not in response.text
