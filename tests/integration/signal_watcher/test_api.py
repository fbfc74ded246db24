from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import pytest

from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.domain.json_paths import JSON_PATH_HINT
from signal_watcher.service_layer.checks import CheckRunner
from signal_watcher.settings import AUDIENCE
from tests.support.fixture_server import FixtureServer
from tests.support.issuers import LocalIssuer
from tests.support.signal_watcher_fixtures import (
    FIXTURE_HOST,
    LOOPBACK_FOR_TESTS,
    Bearer,
    api_client,
    check_now,
    fake_resolver,
    stored,
)
from tests.support.stack import problem_code

MAX_PER_USER = 3


def auth(user: str, *permissions: str) -> Bearer:
    return Bearer(user, *permissions)


ALICE, BOB = auth("alice"), auth("bob")


@pytest.fixture
async def api(units: PostgresUnitsOfWork, local_probe: ProbeClient) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(units, local_probe, max_watchers_per_user=MAX_PER_USER) as client:
        yield client


def watcher_body(url: str, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "w",
        "agent_id": "agent-1",
        "url": url,
        "method": "POST",
        "headers": [{"key": "Authorization", "value": "Bearer s3cret"}, {"key": "Accept", "value": "json"}],
        "body": "p4yload",
        "interval_minutes": 5000,
        "compare_mode": "HASH",
        "prompt_template": "{diff}",
    }
    return {**body, **changes}


async def _create(
    api: httpx.AsyncClient, url: str, headers: Mapping[str, str] = ALICE, **changes: Any
) -> dict[str, Any]:
    response = await api.post("/v1/signal-watchers", json=watcher_body(url, **changes), headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_create_masks_secrets_and_clamps_the_interval(
    api: httpx.AsyncClient, fixture_server: FixtureServer
) -> None:
    created = await _create(api, fixture_server.url(FIXTURE_HOST, "/text"))
    assert created["headers"] == [
        {"key": "Authorization", "value": "******"},
        {"key": "Accept", "value": "json"},
    ]
    assert created["body_length"] == len("p4yload") and "p4yload" not in str(created)
    assert created["interval_minutes"] == 1440 and created["status"] == "ACTIVE"
    fetched = (await api.get(f"/v1/signal-watchers/{created['id']}", headers=ALICE)).json()
    assert fetched == created


async def test_requests_without_a_valid_token_are_unauthorized(api: httpx.AsyncClient) -> None:
    assert (await api.get("/v1/signal-watchers")).status_code == 401
    assert (await api.get("/v1/signal-watchers", headers={"Authorization": "Bearer nope"})).status_code == 401


async def test_a_token_for_another_service_or_of_another_issuer_is_unauthorized(
    api: httpx.AsyncClient,
) -> None:
    """Signed by the very issuer the API trusts, with `signal:read`, but for media-worker: the same 401 as
    a token of an issuer it does not trust; the same user's token for this service is served."""
    untrusted = LocalIssuer("http://127.0.0.1:14999").token("alice", "signal:read", audience=AUDIENCE)
    foreign = {"Authorization": f"Bearer {untrusted}"}
    for headers in (Bearer("alice", "signal:read", audience="media-worker"), foreign):
        for path in ("/v1/signal-watchers", "/v1/admin/signal-watchers"):
            response = await api.get(path, headers=headers)
            assert (response.status_code, problem_code(response)) == (401, "unauthorized"), path
            assert response.headers["www-authenticate"] == "Bearer"
    served = await api.get("/v1/admin/signal-watchers", headers=auth("alice", "signal:read"))
    assert served.status_code == 200, served.text


async def test_users_cannot_see_or_touch_each_others_watchers(
    api: httpx.AsyncClient, fixture_server: FixtureServer
) -> None:
    mine = await _create(api, fixture_server.url(FIXTURE_HOST, "/text"))
    path = f"/v1/signal-watchers/{mine['id']}"
    assert (await api.get("/v1/signal-watchers", headers=BOB)).json()["items"] == []
    for method, suffix, body in [
        ("GET", "", None),
        ("PUT", "", watcher_body(mine["url"])),
        ("POST", "/status", {"status": "PAUSED"}),
        ("GET", "/checks", None),
        ("POST", "/test", None),
        ("DELETE", "", None),
    ]:
        response = await api.request(method, path + suffix, json=body, headers=BOB)
        assert (response.status_code, problem_code(response)) == (404, "not_found"), (method, suffix)
    assert fixture_server.requests == {}  # bob's test-now never probed alice's target
    assert (await api.get(path, headers=ALICE)).status_code == 200


async def test_admin_list_requires_signal_read(api: httpx.AsyncClient, fixture_server: FixtureServer) -> None:
    await _create(api, fixture_server.url(FIXTURE_HOST, "/text"))
    await _create(api, fixture_server.url(FIXTURE_HOST, "/text"), headers=BOB)
    refused = await api.get("/v1/admin/signal-watchers", headers=auth("alice", "media:drain"))
    assert (refused.status_code, problem_code(refused)) == (403, "forbidden")
    assert (await api.get("/v1/admin/signal-watchers", headers=ALICE)).status_code == 403
    listed = (await api.get("/v1/admin/signal-watchers", headers=auth("admin", "signal:read"))).json()[
        "items"
    ]
    assert sorted(w["user_id"] for w in listed) == ["alice", "bob"]
    assert all(w["headers"][0]["value"] == "******" for w in listed)


async def test_per_user_cap_is_enforced(api: httpx.AsyncClient, fixture_server: FixtureServer) -> None:
    for _ in range(MAX_PER_USER):
        await _create(api, fixture_server.url(FIXTURE_HOST, "/text"))
    response = await api.post(
        "/v1/signal-watchers", json=watcher_body(fixture_server.url(FIXTURE_HOST, "/text")), headers=ALICE
    )
    assert (response.status_code, problem_code(response)) == (409, "watcher_limit_reached")
    await _create(api, fixture_server.url(FIXTURE_HOST, "/text"), headers=BOB)


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"url": "http://127.1/"}, "ssrf_ambiguous_ip"),
        ({"url": "http://0x7f000001/"}, "ssrf_ambiguous_ip"),
        ({"url": "http://2130706433/"}, "ssrf_ambiguous_ip"),
        ({"url": "http://0177.0.0.1/"}, "url_invalid"),  # httpx refuses it; inet_aton would read 127.0.0.1
        ({"url": "http://169.254.169.254/"}, "ssrf_blocked_address"),
        ({"url": "http://[::ffff:127.0.0.1]/"}, "ssrf_ipv6_literal"),
        ({"url": "http://db.internal/"}, "ssrf_blocked_name"),
        ({"url": "http://private.example.com/"}, "ssrf_blocked_address"),
        ({"url": "ftp://example.com/"}, "url_scheme_not_allowed"),
        ({"headers": [{"key": "Host", "value": "x"}]}, "forbidden_header"),
        ({"headers": [{"key": f"X-{i}", "value": "v"} for i in range(21)]}, "validation_error"),
        ({"compare_mode": "JSON_FIELD", "json_path": "a..b"}, "invalid_json_path"),
    ],
)
async def test_invalid_definitions_are_refused_with_stable_codes(
    units: PostgresUnitsOfWork, changes: dict[str, Any], code: str
) -> None:
    probe = ProbeClient(
        resolver=fake_resolver({"private.example.com": ["10.1.2.3"]}), guard=LOOPBACK_FOR_TESTS
    )
    async with api_client(units, probe, max_watchers_per_user=MAX_PER_USER) as client:
        response = await client.post(
            "/v1/signal-watchers", json={**watcher_body("https://example.com/"), **changes}, headers=ALICE
        )
    await probe.aclose()
    assert response.status_code == (403 if code.startswith("ssrf_") else 422)  # the SSRF policy: 403 (1.1)
    if code != "validation_error":
        assert problem_code(response) == code


@pytest.mark.parametrize(
    ("written", "stored_as"),
    [("$.item.price", "item.price"), ("$.a.b[0].c", "a.b.0.c"), ("$[0].x", "0.x"), ("a.b.0", "a.b.0")],
)
async def test_a_jsonpath_is_stored_and_returned_in_the_dotted_form(
    api: httpx.AsyncClient,
    fixture_server: FixtureServer,
    units: PostgresUnitsOfWork,
    runner: CheckRunner,
    written: str,
    stored_as: str,
) -> None:
    fixture_server.state["text"] = '{"item": {"price": 7}, "a": {"b": [{"c": 7}]}}'
    url = fixture_server.url(FIXTURE_HOST, "/text")
    changes = {"method": "GET", "body": None, "compare_mode": "JSON_FIELD", "json_path": written}
    created = await _create(api, url, **changes)
    assert created["json_path"] == stored_as
    updated = await api.put(
        f"/v1/signal-watchers/{created['id']}", json=watcher_body(url, **changes), headers=ALICE
    )
    assert updated.json()["json_path"] == stored_as
    assert (await stored(units, "alice", uuid.UUID(created["id"]))).spec.json_path == stored_as
    if stored_as in ("item.price", "a.b.0.c"):
        decision = await check_now(units, runner, uuid.UUID(created["id"]))
        assert decision is not None and decision.error_code is None


@pytest.mark.parametrize("path", ["$..price", "$.items[*].price", "$[?(@.p)]", "$['item']", "$[0:1]", "$"])
async def test_other_jsonpath_is_refused_with_a_hint_that_never_echoes_it(
    api: httpx.AsyncClient, units: PostgresUnitsOfWork, path: str
) -> None:
    changes = {"method": "GET", "body": None, "compare_mode": "JSON_FIELD", "json_path": path}
    body = watcher_body("https://example.com/", **changes)
    response = await api.post("/v1/signal-watchers", json=body, headers=ALICE)
    assert (response.status_code, problem_code(response)) == (422, "invalid_json_path")
    assert response.json()["detail"] == JSON_PATH_HINT
    assert path not in response.text.replace(JSON_PATH_HINT, "")
    assert await units.pool.fetchval(f"SELECT count(*) FROM {units.schema.quoted}.watchers") == 0


async def test_an_update_away_from_post_must_drop_the_stored_body(
    api: httpx.AsyncClient, fixture_server: FixtureServer
) -> None:
    """Leaving `body` out keeps the stored one, which only POST may carry: a conflict with the watcher's
    state (409), not a malformed request; `"body": null` drops it."""
    created = await _create(api, fixture_server.url(FIXTURE_HOST, "/text"))
    path = f"/v1/signal-watchers/{created['id']}"
    kept = {k: v for k, v in watcher_body(fixture_server.url(FIXTURE_HOST, "/text")).items() if k != "body"}
    refused = await api.put(path, json={**kept, "method": "GET"}, headers=ALICE)
    assert (refused.status_code, problem_code(refused)) == (409, "stored_body_requires_post")
    dropped = await api.put(path, json={**kept, "method": "GET", "body": None}, headers=ALICE)
    assert dropped.status_code == 200 and dropped.json()["body_length"] is None
    sent = await api.put(path, json={**kept, "method": "GET", "body": "x"}, headers=ALICE)
    assert (sent.status_code, problem_code(sent)) == (422, "body_requires_post")


@pytest.mark.parametrize("interval", [True, "5"])
async def test_an_interval_is_a_json_integer(
    api: httpx.AsyncClient, fixture_server: FixtureServer, interval: object
) -> None:
    body = watcher_body(fixture_server.url(FIXTURE_HOST, "/text"), interval_minutes=interval)
    refused = await api.post("/v1/signal-watchers", json=body, headers=ALICE)
    assert (refused.status_code, problem_code(refused)) == (422, "invalid_request")


async def test_update_keeps_masked_secrets_and_resets_baseline_only_for_probe_fields(
    api: httpx.AsyncClient, fixture_server: FixtureServer, units: PostgresUnitsOfWork, runner: CheckRunner
) -> None:
    created = await _create(api, fixture_server.url(FIXTURE_HOST, "/echo"))
    path = f"/v1/signal-watchers/{created['id']}"
    await check_now(units, runner, uuid.UUID(created["id"]))
    renamed = watcher_body(created["url"], name="renamed", headers=created["headers"])
    del renamed["body"]
    updated = (await api.put(path, json=renamed, headers=ALICE)).json()
    assert updated["name"] == "renamed" and updated["has_baseline"] is True
    record = await stored(units, "alice", uuid.UUID(created["id"]))
    assert record.spec.headers[0].value == "Bearer s3cret" and record.spec.body == "p4yload"
    changed = (await api.put(path, json={**renamed, "body": "other"}, headers=ALICE)).json()
    assert changed["has_baseline"] is False and changed["body_length"] == 5


async def test_reenabling_a_disabled_watcher_resets_failures_and_baseline(
    api: httpx.AsyncClient, fixture_server: FixtureServer, units: PostgresUnitsOfWork
) -> None:
    created = await _create(api, fixture_server.url(FIXTURE_HOST, "/text"))
    await units.pool.execute(
        f"UPDATE {units.schema.quoted}.watchers SET status = 'DISABLED', consecutive_failures = 5, "
        "last_value_hash = 'h'"
    )
    path = f"/v1/signal-watchers/{created['id']}/status"
    assert (await api.post(path, json={"status": "DISABLED"}, headers=ALICE)).status_code == 422
    enabled = (await api.post(path, json={"status": "ACTIVE"}, headers=ALICE)).json()
    assert (
        enabled["status"] == "ACTIVE" and enabled["consecutive_failures"] == 0 and not enabled["has_baseline"]
    )
    paused = (await api.post(path, json={"status": "PAUSED"}, headers=ALICE)).json()
    assert paused["status"] == "PAUSED"
    async with units() as uow:  # due, but paused: never probed
        assert await uow.watchers.claim_due("x", limit=10, lease_seconds=60) == []


async def test_test_now_previews_without_writing_or_publishing(
    api: httpx.AsyncClient, fixture_server: FixtureServer, units: PostgresUnitsOfWork
) -> None:
    fixture_server.state["text"] = "hello"
    created = await _create(api, fixture_server.url(FIXTURE_HOST, "/text"), method="GET", body=None)
    before = (await api.get(f"/v1/signal-watchers/{created['id']}", headers=ALICE)).json()
    preview = (await api.post(f"/v1/signal-watchers/{created['id']}/test", headers=ALICE)).json()
    assert preview["ok"] is True and preview["http_status"] == 200 and preview["sample"] == "hello"
    assert preview["is_baseline"] is True and preview["would_change"] is False
    assert (await api.get(f"/v1/signal-watchers/{created['id']}", headers=ALICE)).json() == before
    assert await units.pool.fetchval(f"SELECT count(*) FROM {units.schema.quoted}.checks") == 0
    assert await units.pool.fetchval(f"SELECT count(*) FROM {units.schema.quoted}.outbox") == 0


async def test_checks_are_paged_newest_first_and_deleted_with_the_watcher(
    api: httpx.AsyncClient, fixture_server: FixtureServer, units: PostgresUnitsOfWork, runner: CheckRunner
) -> None:
    created = await _create(api, fixture_server.url(FIXTURE_HOST, "/text"), method="GET", body=None)
    watcher_id = uuid.UUID(created["id"])
    for i in range(3):
        fixture_server.state["text"] = f"v{i}"
        await check_now(units, runner, watcher_id)
    page = (await api.get(f"/v1/signal-watchers/{created['id']}/checks?limit=2", headers=ALICE)).json()
    assert [c["changed"] for c in page["items"]] == [True, True]
    rest = (
        await api.get(f"/v1/signal-watchers/{created['id']}/checks?limit=2&offset=2", headers=ALICE)
    ).json()
    assert [c["changed"] for c in rest["items"]] == [False]
    assert page["items"][0]["checked_at"] >= page["items"][1]["checked_at"] >= rest["items"][0]["checked_at"]
    assert (await api.delete(f"/v1/signal-watchers/{created['id']}", headers=ALICE)).status_code == 204
    assert await units.pool.fetchval(f"SELECT count(*) FROM {units.schema.quoted}.checks") == 0


@pytest.mark.parametrize(
    ("port", "status"),
    [("0", 422), ("1", 201), ("65535", 201), ("65536", 422), ("99999", 422), ("12345678901234567890", 422)],
)
async def test_watcher_url_ports_outside_1_to_65535_are_refused_at_create_and_update(
    api: httpx.AsyncClient, fixture_server: FixtureServer, port: str, status: int
) -> None:
    url = f"http://{FIXTURE_HOST}:{port}/text"
    created = await api.post("/v1/signal-watchers", json=watcher_body(url), headers=ALICE)
    assert created.status_code == status, created.text
    if status == 422:
        assert problem_code(created) == "url_port_invalid"
    existing = await _create(api, fixture_server.url(FIXTURE_HOST, "/text"))
    updated = await api.put(f"/v1/signal-watchers/{existing['id']}", json=watcher_body(url), headers=ALICE)
    assert updated.status_code == (200 if status == 201 else 422), updated.text
    if status == 422:
        assert problem_code(updated) == "url_port_invalid"


@pytest.mark.parametrize("port", ["0", "65536", "12345678901234567890"])
async def test_test_now_of_a_stored_watcher_with_a_bad_port_answers_a_stable_error(
    api: httpx.AsyncClient, units: PostgresUnitsOfWork, port: str
) -> None:
    created = await _create(api, "https://example.com/")
    await units.pool.execute(  # as written before ports were validated
        f"UPDATE {units.schema.quoted}.watchers SET url = $1", f"http://{FIXTURE_HOST}:{port}/"
    )
    response = await api.post(f"/v1/signal-watchers/{created['id']}/test", headers=ALICE)
    assert response.status_code == 200, response.text
    assert (response.json()["ok"], response.json()["error_code"]) == (False, "url_refused")


@pytest.mark.parametrize(
    "changes",
    [
        {"name": "w\u0000"},
        {"agent_id": "agent\u00001"},
        {"prompt_template": "{diff}\u0000"},
        {"compare_mode": "JSON_FIELD", "json_path": "a.\u0000b"},
        {"headers": [{"key": "X-A", "value": "v\u0000"}]},
        {"url": "https://example.com/\u0000"},
        {"body": "\u0000"},
    ],
)
async def test_a_nul_in_any_text_field_is_refused_before_any_work(
    api: httpx.AsyncClient, units: PostgresUnitsOfWork, changes: dict[str, Any]
) -> None:
    response = await api.post(
        "/v1/signal-watchers", json={**watcher_body("https://example.com/"), **changes}, headers=ALICE
    )
    assert (response.status_code, problem_code(response)) == (400, "invalid_text")
    async with units() as uow:
        assert await uow.watchers.count_for_user("alice") == 0


async def test_a_nul_in_a_path_or_query_parameter_is_refused(api: httpx.AsyncClient) -> None:
    for url in ("/v1/signal-watchers/%00", "/v1/signal-watchers?limit=1%00"):
        response = await api.get(url, headers=ALICE)
        assert (response.status_code, problem_code(response)) == (400, "invalid_text"), url
