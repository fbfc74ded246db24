"""The console's media reads: a user's materials, newest first and keyset-paged; the worker instances."""

from __future__ import annotations

import os

import httpx

from tests.conftest import problem_code
from tests.integration.media_worker.conftest import Media
from tests.integration.media_worker.test_uploads import multipart_body, multipart_headers


async def test_a_user_lists_only_own_materials_newest_first_in_pages(
    client: httpx.AsyncClient, media: Media
) -> None:
    mine = []
    for n in range(3):
        body = multipart_body(os.urandom(100))
        response = await client.post(
            f"/v1/materials?title=m{n}", content=body, headers=multipart_headers(media)
        )
        mine.append(response.json()["material_id"])
    body = multipart_body(os.urandom(100))
    await client.post("/v1/materials", content=body, headers=multipart_headers(media, "user-2"))
    first = (await client.get("/v1/materials", params={"limit": 2}, headers=media.auth())).json()
    assert [m["material_id"] for m in first["items"]] == mine[::-1][:2]
    assert first["items"][0]["status"] == "pending" and first["items"][0]["source_key"] is None
    rest = await client.get(
        "/v1/materials", params={"limit": 2, "cursor": first["next_cursor"]}, headers=media.auth()
    )
    assert [m["material_id"] for m in rest.json()["items"]] == [mine[0]]
    assert rest.json()["next_cursor"] is None
    for limit, status in ((0, 422), (1, 200), (100, 200), (101, 422)):
        assert (
            await client.get("/v1/materials", params={"limit": limit}, headers=media.auth())
        ).status_code == status
    bad = await client.get("/v1/materials", params={"cursor": "%%"}, headers=media.auth())
    assert (bad.status_code, problem_code(bad)) == (400, "invalid_cursor")
    assert (await client.get("/v1/materials")).status_code == 401


async def test_operators_see_the_worker_instances(client: httpx.AsyncClient, media: Media) -> None:
    assert (await client.get("/internal/instances", headers=media.auth())).status_code == 403
    await client.post("/internal/drain", headers=media.operator)
    listed = (await client.get("/internal/instances", headers=media.operator)).json()["items"]
    assert [(i["draining"], i["this_instance"], i["leased_jobs"]) for i in listed] == [(True, True, 0)]
