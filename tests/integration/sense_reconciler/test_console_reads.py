"""Control API reads the console needs: devices by site, reconcile states of a page, a site's limit."""

from __future__ import annotations

import uuid

import httpx

from sense_reconciler.domain import limits
from tests.integration.sense_reconciler.test_control_api import api, device_body
from tests.support.stack import problem_code

__all__ = ["api"]


async def test_devices_are_listed_by_tenant_and_site(api: httpx.AsyncClient) -> None:
    ids = {}
    for site in ("site-1", "site-2", "site-2"):
        created = (await api.post("/v1/devices", json=device_body(site_id=site))).json()
        ids.setdefault(site, set()).add(created["id"])
    page = (await api.get("/v1/devices", params={"tenant_id": "tenant-a", "site_id": "site-2"})).json()
    assert {d["id"] for d in page["items"]} == ids["site-2"]
    too_long = await api.get("/v1/devices", params={"site_id": "s" * (limits.ID_MAX_CHARS + 1)})
    assert (too_long.status_code, problem_code(too_long)) == (422, "invalid_request")


async def test_reconcile_states_of_a_page_in_one_call(api: httpx.AsyncClient) -> None:
    created = [(await api.post("/v1/devices", json=device_body())).json()["id"] for _ in range(3)]
    unknown = str(uuid.uuid4())
    response = await api.get("/v1/reconcile-statuses", params={"device_id": [*created, unknown]})
    assert response.status_code == 200
    items = response.json()["items"]
    assert {i["device_id"] for i in items} == set(created)
    assert all(i["desired_generation"] == 1 and i["status"] == "pending" for i in items)
    ids = [str(uuid.uuid4()) for _ in range(limits.LIST_PAGE_SIZE_MAX + 1)]
    assert (await api.get("/v1/reconcile-statuses", params={"device_id": ids[:-1]})).status_code == 200
    assert (await api.get("/v1/reconcile-statuses", params={"device_id": ids})).status_code == 422
    assert (await api.get("/v1/reconcile-statuses")).status_code == 422


async def test_a_site_limit_reads_back_with_the_enabled_count(api: httpx.AsyncClient) -> None:
    fresh = (await api.get("/v1/sites/tenant-a/never-seen")).json()
    assert fresh == {
        "tenant_id": "tenant-a",
        "site_id": "never-seen",
        "max_video_channels": limits.SITE_MAX_VIDEO_CHANNELS_DEFAULT,
        "media_server_id": "default",
        "enabled_devices": 0,
    }
    await api.post("/v1/devices", json=device_body(site_id="site-9"))
    assert (await api.put("/v1/sites/tenant-a/site-9", json={"max_video_channels": 4})).status_code == 200
    assert (await api.get("/v1/sites/tenant-a/site-9")).json() == {
        "tenant_id": "tenant-a",
        "site_id": "site-9",
        "max_video_channels": 4,
        "media_server_id": "default",
        "enabled_devices": 1,
    }
