"""Fleets: two MediaMTX servers with authenticated Control APIs. A site with path names as operators write
them (`site/cam`) moves from one server to the other; Sense creates its paths on the new server and then
deletes them exactly on the old one; orphan-scanner classifies and gates each server on its own and
deletes only on the candidate's server."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.support.e2e_fixtures import (
    MEDIA_SERVERS,
    Witness,
    camera_source,
    device_body,
    eventually,
    orphan_apply,
    orphan_report,
    path_names,
    path_source,
)
from yovision_platform.tools.environment import LocalEnvironment

EXIT_OK = 0


async def site_of(sense: httpx.AsyncClient, tenant: str, site: str) -> dict[str, Any]:
    document: dict[str, Any] = (await sense.get(f"/v1/sites/{tenant}/{site}")).json()
    return document


async def sources_on(mediamtx: httpx.AsyncClient, paths: list[str]) -> list[str | None]:
    return [await path_source(mediamtx, path) for path in paths]


async def test_a_site_with_slash_names_moves_to_the_second_server(
    env: LocalEnvironment,
    sense: httpx.AsyncClient,
    mediamtx: httpx.AsyncClient,
    mediamtx_b: httpx.AsyncClient,
    witness: Witness,
) -> None:
    tenant, site = "tenant-fleet", f"site-{uuid.uuid4().hex[:6]}"
    paths = [f"{site}/cam-0{n}" for n in range(3)] + [f"{site}/lobby.east_2/main"]
    sources = [camera_source(witness, f"10.6.0.{n + 1}") for n in range(len(paths))]
    ids = []
    for path, source in zip(paths, sources, strict=True):
        created = await sense.post("/v1/devices", json=device_body(tenant, site, path, source))
        assert created.status_code == 201, created.text
        assert created.json()["media_server_id"] == "mtx-a"
        ids.append(created.json()["id"])

    async def on_a() -> bool:
        return await sources_on(mediamtx, paths) == sources

    await eventually(on_a, what="paths configured on mtx-a")
    assert await sources_on(mediamtx_b, paths) == [None] * len(paths)
    # a neighbouring path on mtx-a, made by hand (not Sense's), must survive the move's exact deletes there
    neighbour = f"{site}/cam-00-spare"
    assert (await mediamtx.post(f"/v3/config/paths/add/{neighbour}", json={"source": "publisher"})).is_success

    moved = await sense.put(f"/v1/sites/{tenant}/{site}", json={"media_server_id": "mtx-b"})
    assert moved.status_code == 200, moved.text
    assert moved.json()["media_server_id"] == "mtx-b" and moved.json()["enabled_devices"] == len(paths)

    async def on_b_only() -> bool:
        moved_over = await sources_on(mediamtx_b, paths) == sources
        return moved_over and await sources_on(mediamtx, paths) == [None] * len(paths)

    await eventually(on_b_only, what="paths on mtx-b, then deleted exactly on mtx-a")
    assert neighbour in await path_names(mediamtx)
    for device_id in ids:
        status = (await sense.get(f"/v1/devices/{device_id}/reconcile-status")).json()
        assert (status["media_server_id"], status["status"]) == ("mtx-b", "converged")
        assert (await sense.get(f"/v1/devices/{device_id}")).json()["media_server_id"] == "mtx-b"
    assert (await site_of(sense, tenant, site))["media_server_id"] == "mtx-b"

    # disabling deletes exactly the device's path on its server, nothing else
    off = await sense.put(f"/v1/devices/{ids[0]}/desired-state", json={"desired_state": "disabled"})
    assert off.status_code == 200

    async def first_gone() -> bool:
        return await path_source(mediamtx_b, paths[0]) is None

    await eventually(first_gone, what="the disabled device's path deleted on mtx-b")
    assert await sources_on(mediamtx_b, paths[1:]) == sources[1:]

    async with httpx.AsyncClient(base_url=env.url("sense-reconciler")) as plain:
        scrape = (await plain.get("/metrics")).text
    assert 'media_server="mtx-b"' in scrape
    for secret in (env.media_servers["mtx-b"].url, *paths, site):
        assert secret not in scrape


async def test_orphans_are_classified_gated_and_deleted_per_server(
    env: LocalEnvironment,
    sense: httpx.AsyncClient,
    mediamtx: httpx.AsyncClient,
    mediamtx_b: httpx.AsyncClient,
    witness: Witness,
) -> None:
    tenant, site = "tenant-fleet-orphan", f"site-{uuid.uuid4().hex[:6]}"
    moved = await sense.put(f"/v1/sites/{tenant}/{site}", json={"media_server_id": "mtx-b"})
    assert moved.status_code == 200
    live = [f"{site}/live-{n}" for n in range(9)]  # 1 candidate * 100 <= 10+ paths of mtx-b * 10
    for n, path in enumerate(live):
        body = device_body(tenant, site, path, camera_source(witness, f"10.7.0.{n + 1}"))
        assert (await sense.post("/v1/devices", json=body)).status_code == 201
    stale = f"{site}/stale"
    stale_source = camera_source(witness, "10.7.1.1")
    created = await sense.post("/v1/devices", json=device_body(tenant, site, stale, stale_source))
    await eventually(lambda: _listed(mediamtx_b, [*live, stale]), what="paths on mtx-b")
    off = await sense.put(
        f"/v1/devices/{created.json()['id']}/desired-state", json={"desired_state": "disabled"}
    )
    assert off.status_code == 200
    await eventually(lambda: _absent(mediamtx_b, stale), what="Sense removed the disabled device's path")
    # by hand: the stale path back on mtx-b (Sense once owned it there), the same name on mtx-a (never)
    for server in (mediamtx_b, mediamtx):
        assert (await server.post(f"/v3/config/paths/add/{stale}", json={"source": stale_source})).is_success
    await eventually(lambda: _listed(mediamtx, [stale]), what="the hand-made copy on mtx-a")

    candidate = {"media_server_id": "mtx-b", "path_name": stale}
    scan = await eventually(lambda: _report_with(env, candidate), what="report sees the stale path on mtx-b")
    assert {"media_server_id": "mtx-a", "path_name": stale} in scan["unowned"]
    assert scan["candidates"] == [candidate]
    assert scan["gate_preview"]["allowed"] is True
    assert set(scan["servers"]) == set(MEDIA_SERVERS), "every registered server is scanned"
    code, result = await orphan_apply(env, scan)
    assert code == EXIT_OK, result
    assert [(i["media_server_id"], i["path_name"], i["outcome"]) for i in result["items"]] == [
        ("mtx-b", stale, "deleted")
    ]
    await eventually(lambda: _absent(mediamtx_b, stale), what="deleted on mtx-b")
    assert stale in await path_names(mediamtx), "the unowned copy on mtx-a must never be deleted"
    assert set(live) <= await path_names(mediamtx_b)


async def _listed(mediamtx: httpx.AsyncClient, paths: list[str]) -> bool:
    return set(paths) <= await path_names(mediamtx)


async def _absent(mediamtx: httpx.AsyncClient, path: str) -> bool:
    return await path_source(mediamtx, path) is None


async def _report_with(env: LocalEnvironment, candidate: dict[str, str]) -> dict[str, Any] | None:
    scan = await orphan_report(env)
    return scan if candidate in scan["candidates"] else None
