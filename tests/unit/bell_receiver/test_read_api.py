"""The read APIs through the real app on the fakes: `GET /v1/audit-events` (filters, keyset pages,
refusals) and the inbox's read marks. The fakes' filtering and ordering equal PostgreSQL's by
tests/ports/bell_receiver; the inbox over a real server and PostgreSQL: tests/integration/bell_receiver/
test_ingest_and_inbox.py."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx

from bell_receiver.domain.audit import Channel
from bell_receiver.domain.inbox import NewNotification
from bell_receiver.entrypoints.http_audit import AUDIT_READ_PERMISSION, MAX_PAGE_SIZE
from bell_receiver.settings import AUDIENCE
from tests.support.bell_samples import T0
from tests.support.bell_samples import audit_row as row
from tests.support.stack import problem_code
from tests.unit.bell_receiver.conftest import Api
from yovision_platform.web import AUDIENCES, PERMISSIONS


async def seed(api: Api) -> None:
    async with api.fakes.uow as uow:
        await uow.audit_trail.append([row(n, device=f"dev-{n % 3}") for n in range(10)], Channel.HTTP_RELAY)
        await uow.audit_trail.append(
            [row(100 + n, source="media", event_type="TranscodeFailed") for n in range(3)], Channel.KAFKA
        )


def auth(api: Api, *permissions: str) -> dict[str, str]:
    return api.auth("auditor", *permissions)


async def test_the_trail_is_newest_first_filtered_and_keyset_paged(api: Api) -> None:
    await seed(api)
    http = api.http
    headers = auth(api, AUDIT_READ_PERMISSION)
    everything = (await http.get("/v1/audit-events", headers=headers)).json()
    times = [item["occurred_at"] for item in everything["items"]]
    assert len(times) == 13 and times == sorted(times, reverse=True)
    assert everything["next_cursor"] is None
    assert everything["items"][-1]["fact"] == {"n": 0, "changed_fields": ["source_uri"]}

    pages: list[int] = []
    cursor = None
    while True:
        params: dict[str, str | int] = {"source_system": "sense", "limit": 4}
        if cursor:
            params["cursor"] = cursor
        page = (await http.get("/v1/audit-events", params=params, headers=headers)).json()
        pages.append(len(page["items"]))
        assert {item["source_system"] for item in page["items"]} == {"sense"}
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == [4, 4, 2]

    device = (await http.get("/v1/audit-events", params={"device_id": "dev-1"}, headers=headers)).json()
    assert [i["fact"]["n"] for i in device["items"]] == [7, 4, 1]
    typed = await http.get(
        "/v1/audit-events",
        params={"source_system": "media", "event_type": "TranscodeFailed"},
        headers=headers,
    )
    assert [i["fact"]["n"] for i in typed.json()["items"]] == [102, 101, 100]
    window = await http.get(
        "/v1/audit-events",
        params={
            "occurred_from": (T0 + timedelta(seconds=2)).isoformat(),
            "occurred_before": (T0 + timedelta(seconds=5)).isoformat(),
            "actor": "actor-0",
        },
        headers=headers,
    )
    assert [i["fact"]["n"] for i in window.json()["items"]] == [4, 2]


async def test_the_trail_needs_the_audit_permission_and_valid_input(api: Api) -> None:
    http = api.http
    assert (await http.get("/v1/audit-events")).status_code == 401
    forbidden = await http.get("/v1/audit-events", headers=auth(api, "signal:read"))
    assert (forbidden.status_code, problem_code(forbidden)) == (403, "forbidden")
    headers = auth(api, AUDIT_READ_PERMISSION)
    for limit, status in ((0, 422), (1, 200), (MAX_PAGE_SIZE, 200), (MAX_PAGE_SIZE + 1, 422)):
        response = await http.get("/v1/audit-events", params={"limit": limit}, headers=headers)
        assert response.status_code == status
    for value, status in (("a" * 128, 200), ("a" * 129, 422), ("bad value", 422)):
        response = await http.get("/v1/audit-events", params={"device_id": value}, headers=headers)
        assert response.status_code == status
        assert value.encode() not in response.content or status == 200
    bad_cursor = await http.get("/v1/audit-events", params={"cursor": "!!"}, headers=headers)
    assert (bad_cursor.status_code, problem_code(bad_cursor)) == (400, "invalid_cursor")
    naive = await http.get(
        "/v1/audit-events", params={"occurred_from": "2026-11-30T12:00:00"}, headers=headers
    )
    assert naive.status_code == 422
    for not_a_date_time in (
        "0.5",
        "1764590400",
        "2026-11-30 12:00:00Z",
    ):  # pydantic read numbers as Unix times
        refused = await http.get(
            "/v1/audit-events", params={"occurred_from": not_a_date_time}, headers=headers
        )
        assert (refused.status_code, problem_code(refused)) == (422, "invalid_request")
    empty_range = await http.get(
        "/v1/audit-events",
        params={"occurred_from": T0.isoformat(), "occurred_before": T0.isoformat()},
        headers=headers,
    )
    assert (empty_range.status_code, empty_range.json()) == (200, {"items": [], "next_cursor": None})


async def test_a_user_marks_own_notifications_read_and_unread(api: Api) -> None:
    async with api.fakes.uow as uow:
        for user in ("reader", "other"):
            await uow.inbox.add(
                NewNotification(
                    user_id=user,
                    kind="WATCHER_DISABLED",
                    source_system="signal",
                    event_id=uuid.uuid4(),
                    occurred_at=T0,
                    data={"watcher_name": user},
                )
            )
    http = api.http
    mine = api.auth("reader")

    async def items(headers: dict[str, str]) -> list[dict[str, object]]:
        response: httpx.Response = await http.get("/v1/notifications", headers=headers)
        return list(response.json()["items"])

    [notification] = await items(mine)
    assert notification["read_at"] is None
    url = f"/v1/notifications/{notification['id']}/read"
    assert (await http.put(url, headers=mine)).status_code == 204
    [read] = await items(mine)
    assert read["read_at"] is not None
    assert (await http.put(url, headers=mine)).status_code == 204
    assert (await items(mine))[0]["read_at"] == read["read_at"]
    assert (await http.delete(url, headers=mine)).status_code == 204
    assert (await items(mine))[0]["read_at"] is None
    theirs = api.auth("other")
    stranger = await http.put(url, headers=theirs)
    assert (stranger.status_code, problem_code(stranger)) == (404, "not_found")
    assert (await http.put(url)).status_code == 401
    for bad in ("0", "x", str(2**63)):
        assert (await http.put(f"/v1/notifications/{bad}/read", headers=mine)).status_code == 422


async def test_another_services_token_is_refused_everywhere_and_the_trail_needs_its_permission(
    api: Api,
) -> None:
    """A token for every other audience, with every permission, is the uniform 401 on each read route; a
    Bell token without `bell:audit-read` reads its own inbox but not the trail (403)."""
    async with api.fakes.uow as uow:
        await uow.inbox.add(
            NewNotification(
                user_id="reader",
                kind="WATCHER_DISABLED",
                source_system="signal",
                event_id=uuid.uuid4(),
                occurred_at=T0,
                data={"watcher_name": "w"},
            )
        )
    others = [audience for audience in AUDIENCES if audience != AUDIENCE]
    foreign = {"authorization": f"Bearer {await api.issuer.user_token('reader', PERMISSIONS, others)}"}
    lacking = api.auth("reader", *(p for p in PERMISSIONS if p != AUDIT_READ_PERMISSION))
    inbox = (await api.http.get("/v1/notifications", headers=lacking)).json()
    assert [item["data"]["watcher_name"] for item in inbox["items"]] == ["w"]
    mark = f"/v1/notifications/{inbox['items'][0]['id']}/read"
    routes = [("GET", "/v1/audit-events"), ("GET", "/v1/notifications"), ("PUT", mark), ("DELETE", mark)]
    for method, path in routes:
        refused = await api.http.request(method, path, headers=foreign)
        assert (refused.status_code, problem_code(refused)) == (401, "unauthorized"), path
        assert refused.headers["www-authenticate"] == "Bearer"

    forbidden = await api.http.get("/v1/audit-events", headers=lacking)
    assert (forbidden.status_code, problem_code(forbidden)) == (403, "forbidden")
    assert (await api.http.put(mark, headers=lacking)).status_code == 204
    auditor = api.auth("reader", AUDIT_READ_PERMISSION)
    assert (await api.http.get("/v1/audit-events", headers=auditor)).status_code == 200
