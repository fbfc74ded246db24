"""Material use cases and their routes on the fakes: status with the protection window, outputs, retry, the
owner's paged listing."""

from __future__ import annotations

import uuid

import httpx
import pytest

from media_worker.domain.errors import MaterialNotFound
from media_worker.domain.limits import PROTECTION_WINDOW
from media_worker.domain.material import MaterialStatus
from tests.support.media_uploads import multipart_body, multipart_headers
from tests.support.stack import problem_code
from tests.unit.media_worker.conftest import OWNER, Fakes, body_of


async def fail(fakes: Fakes, material_id: uuid.UUID, code: str = "ffmpeg_failed") -> None:
    async with fakes.uow() as uow:
        claimed = await uow.jobs.claim("media-a", 60.0)
        assert claimed is not None and claimed.material_id == material_id
        await uow.jobs.start(claimed.job_id, claimed.lease)
        await uow.jobs.finish(claimed.job_id, claimed.lease, state="failed", error_code=code)
        await uow.materials.set_processing(material_id)
        await uow.materials.fail(material_id, code)


async def test_a_user_sees_only_own_materials_and_never_the_source_during_protection(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    response = await client.post(
        "/v1/materials", content=multipart_body(b"v" * 100), headers=multipart_headers(fakes)
    )
    material_id = response.json()["material_id"]
    own = await client.get(f"/v1/materials/{material_id}", headers=fakes.auth())
    assert own.status_code == 200
    view = own.json()
    assert (view["status"], view["progress"], view["error_code"], view["outputs"], view["size_bytes"]) == (
        "pending",
        0,
        None,
        [],
        100,
    )
    assert view["source_key"] is None and "sources/" not in own.text
    other = await client.get(f"/v1/materials/{material_id}", headers=fakes.auth("user-2"))
    assert (other.status_code, problem_code(other)) == (404, "not_found")
    assert (await client.get(f"/v1/materials/{uuid.uuid4()}", headers=fakes.auth())).status_code == 404
    assert (await client.get(f"/v1/materials/{material_id}")).status_code == 401


@pytest.mark.parametrize(
    ("after", "shown"),
    [(PROTECTION_WINDOW.total_seconds() - 1, False), (PROTECTION_WINDOW.total_seconds(), True)],
)
async def test_the_source_location_is_shown_once_the_protection_window_ended(
    client: httpx.AsyncClient, fakes: Fakes, after: float, shown: bool
) -> None:
    material_id = await fakes.upload()
    fakes.clock.advance(after)
    view = (await client.get(f"/v1/materials/{material_id}", headers=fakes.auth())).json()
    assert view["source_key"] == (f"sources/{material_id}/source" if shown else None)


async def test_an_output_is_found_only_once_recorded(fakes: Fakes) -> None:
    material_id = await fakes.upload()
    with pytest.raises(MaterialNotFound):
        await fakes.use_cases.materials.output(OWNER, material_id, "preview_720p")
    async with fakes.uow() as uow:
        await uow.materials.complete(
            material_id,
            {
                "cover": "outputs/m/t/cover.jpg",
                "preview_720p": "outputs/m/t/preview.mp4",
                "clip_10s": "outputs/m/t/clip.mp4",
            },
        )
    found = await fakes.use_cases.materials.output(OWNER, material_id, "preview_720p")
    assert (found.path, found.media_type) == (
        fakes.storage.local_path("outputs/m/t/preview.mp4"),
        "video/mp4",
    )
    assert (await fakes.use_cases.materials.output(OWNER, material_id, "cover")).media_type == "image/jpeg"
    for owner, kind in (("user-2", "cover"), (OWNER, "source"), (OWNER, "../cover")):
        with pytest.raises(MaterialNotFound):
            await fakes.use_cases.materials.output(owner, material_id, kind)


async def test_only_a_failed_material_is_retried(client: httpx.AsyncClient, fakes: Fakes) -> None:
    material_id = await fakes.upload()
    refused = await client.post(f"/v1/materials/{material_id}/retry", headers=fakes.auth())
    assert (refused.status_code, problem_code(refused)) == (409, "not_retryable")
    await fail(fakes, material_id)
    other = await client.post(f"/v1/materials/{material_id}/retry", headers=fakes.auth("user-2"))
    assert (other.status_code, problem_code(other)) == (404, "not_found")
    retried = await client.post(f"/v1/materials/{material_id}/retry", headers=fakes.auth())
    assert (retried.status_code, retried.json()) == (
        202,
        {"material_id": str(material_id), "status": "pending"},
    )
    material = await fakes.material(material_id)
    assert (material.status, material.error_code, material.progress) == (MaterialStatus.PENDING, None, 0)
    async with fakes.uow() as uow:
        claimed = await uow.jobs.claim("media-a", 60.0)
    assert claimed is not None and claimed.material_id == material_id
    assert fakes.woken == ["job", "job"]  # the upload, then the retry


async def test_a_user_lists_only_own_materials_newest_first_in_pages(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    mine = []
    for n in range(3):
        fakes.clock.advance(1)
        mine.append(
            str(
                await fakes.use_cases.uploads.upload_plain(
                    OWNER, f"m{n}", None, body_of(b"v"), request_length="1"
                )
            )
        )
    await fakes.upload(owner="user-2")
    first = (await client.get("/v1/materials", params={"limit": 2}, headers=fakes.auth())).json()
    assert [m["material_id"] for m in first["items"]] == mine[::-1][:2]
    assert first["items"][0]["title"] == "m2" and first["items"][0]["source_key"] is None
    rest = (
        await client.get(
            "/v1/materials", params={"limit": 2, "cursor": first["next_cursor"]}, headers=fakes.auth()
        )
    ).json()
    assert [m["material_id"] for m in rest["items"]] == [mine[0]]
    assert rest["next_cursor"] is None
    exact = (await client.get("/v1/materials", params={"limit": 3}, headers=fakes.auth())).json()
    assert len(exact["items"]) == 3 and exact["next_cursor"] is None


async def test_listing_limits_and_cursor(client: httpx.AsyncClient, fakes: Fakes) -> None:
    for limit, status in ((0, 422), (1, 200), (100, 200), (101, 422)):
        response = await client.get("/v1/materials", params={"limit": limit}, headers=fakes.auth())
        assert response.status_code == status
    bad = await client.get("/v1/materials", params={"cursor": "%%"}, headers=fakes.auth())
    assert (bad.status_code, problem_code(bad)) == (400, "invalid_cursor")
    assert fakes.registry.get_sample_value("media_api_refusals_total", {"code": "invalid_cursor"}) == 1
    assert (await client.get("/v1/materials")).status_code == 401
