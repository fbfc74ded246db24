"""Who may call the user API, through its real routes on the fakes: the access tokens of the trusted issuer
(`LocalIssuer`, shaped as Hydra's) for the audience `signal-watcher` only; each user reaches the watchers of
its own `sub`; the admin list needs `signal:read`, whoever holds it (a user, or a machine client)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from signal_watcher.adapters.memory import MemoryProbe, MemorySignalDatabase
from signal_watcher.entrypoints.api import ADMIN_PERMISSION
from signal_watcher.settings import AUDIENCE
from tests.support.signal_watcher_fixtures import ISSUER, Bearer, api_client
from tests.support.stack import problem_code
from tests.unit.signal_watcher.conftest import url

WATCHER = {"name": "w", "agent_id": "a", "url": url("/text"), "prompt_template": "{diff}"}


@pytest.fixture
async def api(database: MemorySignalDatabase, probe: MemoryProbe) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(database, probe) as client:
        yield client


async def test_a_token_for_another_service_is_401_and_one_without_signal_read_is_403(
    api: httpx.AsyncClient, database: MemorySignalDatabase
) -> None:
    created = await api.post("/v1/signal-watchers", json=WATCHER, headers=Bearer("alice"))
    assert created.status_code == 201, created.text
    foreign = Bearer("alice", ADMIN_PERMISSION, audience="media-worker")
    for method, path in [
        ("GET", "/v1/signal-watchers"),
        ("GET", f"/v1/signal-watchers/{created.json()['id']}"),
        ("POST", "/v1/signal-watchers"),
        ("GET", "/v1/admin/signal-watchers"),
    ]:
        body = WATCHER if method == "POST" else None
        refused = await api.request(method, path, json=body, headers=foreign)
        assert (refused.status_code, problem_code(refused)) == (401, "unauthorized"), path
    assert len(database.tables.watchers) == 1  # the refused create wrote nothing
    lacking = await api.get("/v1/admin/signal-watchers", headers=Bearer("alice", "media:drain"))
    assert (lacking.status_code, problem_code(lacking)) == (403, "forbidden")
    listed = await api.get("/v1/admin/signal-watchers", headers=Bearer("admin", ADMIN_PERMISSION))
    assert [w["user_id"] for w in listed.json()["items"]] == ["alice"]


async def test_each_caller_is_the_sub_of_its_token(api: httpx.AsyncClient) -> None:
    created = await api.post("/v1/signal-watchers", json=WATCHER, headers=Bearer("alice"))
    path = f"/v1/signal-watchers/{created.json()['id']}"
    assert (await api.get(path, headers=Bearer("alice"))).status_code == 200
    other = await api.get(
        path, headers=Bearer("bob", ADMIN_PERMISSION)
    )  # a permission opens no one's watcher
    assert (other.status_code, problem_code(other)) == (404, "not_found")
    machine = await ISSUER.machine_token("bench", [ADMIN_PERMISSION], [AUDIENCE])
    listed = await api.get("/v1/admin/signal-watchers", headers={"Authorization": f"Bearer {machine}"})
    assert listed.status_code == 200 and [w["user_id"] for w in listed.json()["items"]] == ["alice"]
    own = await api.get("/v1/signal-watchers", headers={"Authorization": f"Bearer {machine}"})
    assert own.json()["items"] == []  # the machine client is a caller of its own: `sub` is its id
