"""`POST /v1/signal-watchers/{id}/check`: a real check as soon as possible, for ACTIVE watchers only, at most
one per watcher every CHECK_NOW_MIN_SPACING_SECONDS (database clock)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.domain.errors import CHECK_NOW_MIN_SPACING_SECONDS
from tests.support.fixture_server import FixtureServer
from tests.support.signal_watcher_fixtures import FIXTURE_HOST, Bearer, Wakes, api_client

ALICE, BOB = Bearer("alice"), Bearer("bob")


@pytest.fixture
async def api(
    units: PostgresUnitsOfWork, local_probe: ProbeClient, wakes: Wakes
) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(units, local_probe, check_requested=wakes) as client:
        yield client


async def created(api: httpx.AsyncClient, fixture_server: FixtureServer) -> str:
    body = {
        "name": "w",
        "agent_id": "agent-1",
        "url": fixture_server.url(FIXTURE_HOST, "/text"),
        "method": "GET",
        "headers": [],
        "interval_minutes": 60,
        "compare_mode": "HASH",
        "prompt_template": "{diff}",
    }
    response = await api.post("/v1/signal-watchers", json=body, headers=ALICE)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def last_checked(units: PostgresUnitsOfWork, watcher_id: str, seconds_ago: float) -> None:
    await units.pool.execute(
        f"UPDATE {units.schema.quoted}.watchers SET last_checked_at = now() - make_interval(secs => $2), "
        "next_check_at = now() + interval '1 hour' WHERE id = $1",
        uuid.UUID(watcher_id),
        seconds_ago,
    )


async def test_a_check_request_makes_the_watcher_due_now_and_wakes_the_scheduler(
    api: httpx.AsyncClient,
    fixture_server: FixtureServer,
    units: PostgresUnitsOfWork,
    wakes: Wakes,
) -> None:
    watcher_id = await created(api, fixture_server)
    await last_checked(units, watcher_id, 3600)
    response = await api.post(f"/v1/signal-watchers/{watcher_id}/check", headers=ALICE)
    assert response.status_code == 202, response.text
    due = await units.pool.fetchval(
        f"SELECT next_check_at <= now() FROM {units.schema.quoted}.watchers WHERE id = $1",
        uuid.UUID(watcher_id),
    )
    assert due is True and wakes.count == 1


@pytest.mark.parametrize(
    ("seconds_ago", "status"),
    [
        (CHECK_NOW_MIN_SPACING_SECONDS + 1, 202),
        (CHECK_NOW_MIN_SPACING_SECONDS + 0.2, 202),
        (CHECK_NOW_MIN_SPACING_SECONDS - 2, 429),  # 2 s of slack for the time between the two statements
        (0, 429),
    ],
)
async def test_checks_are_spaced_by_the_database_clock(
    api: httpx.AsyncClient,
    fixture_server: FixtureServer,
    units: PostgresUnitsOfWork,
    wakes: Wakes,
    seconds_ago: float,
    status: int,
) -> None:
    watcher_id = await created(api, fixture_server)
    await last_checked(units, watcher_id, seconds_ago)
    response = await api.post(f"/v1/signal-watchers/{watcher_id}/check", headers=ALICE)
    assert response.status_code == status, response.text
    if status == 429:
        assert response.json()["error"] == "check_too_soon"
        assert response.headers["Retry-After"] == str(CHECK_NOW_MIN_SPACING_SECONDS)
        assert wakes.count == 0


async def test_only_an_active_watcher_of_the_caller_is_checked(
    api: httpx.AsyncClient, fixture_server: FixtureServer, wakes: Wakes
) -> None:
    watcher_id = await created(api, fixture_server)
    assert (await api.post(f"/v1/signal-watchers/{watcher_id}/check", headers=BOB)).status_code == 404
    paused = await api.post(
        f"/v1/signal-watchers/{watcher_id}/status", json={"status": "PAUSED"}, headers=ALICE
    )
    assert paused.status_code == 200
    response = await api.post(f"/v1/signal-watchers/{watcher_id}/check", headers=ALICE)
    assert (response.status_code, response.json()["error"]) == (409, "watcher_not_active")
    assert wakes.count == 0
