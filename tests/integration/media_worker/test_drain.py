"""Drain protocol over the API: stops new work, and reports safe-to-stop only for its own idle instance."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from media_worker.adapters.capability import CapabilityFile
from tests.conftest import problem_code
from tests.integration.media_worker.conftest import INSTANCE, Media, partial_files_written
from tests.integration.media_worker.test_transcoder import _start_slow, media, upload

__all__ = ["media"]  # the video-sized limits fixture
from tests.integration.media_worker.test_uploads import init, multipart_body, multipart_headers


async def test_drain_needs_the_drain_permission(client: httpx.AsyncClient, media: Media) -> None:
    assert (await client.get("/internal/drain", headers=media.auth())).status_code == 403
    assert (await client.post("/internal/drain")).status_code == 401


async def test_drain_stops_new_uploads_and_is_safe_only_when_idle(
    client: httpx.AsyncClient, media: Media
) -> None:
    CapabilityFile(media.capability_file).publish(INSTANCE)
    before = (await client.get("/internal/drain", headers=media.operator)).json()
    assert (before["safe_to_stop"], before["reason"]) == (False, "not_draining")
    drained = (await client.post("/internal/drain", headers=media.operator)).json()
    assert drained["draining"] is True
    assert (drained["safe_to_stop"], drained["instance_id"]) == (True, INSTANCE)
    refused = await client.post(
        "/v1/materials", content=multipart_body(b"v"), headers=multipart_headers(media)
    )
    assert (refused.status_code, problem_code(refused), refused.headers["Retry-After"]) == (
        503,
        "draining",
        "30",
    )
    assert (await init(client, media, 1000, 1000)).status_code == 503
    row = await media.fetchrow("SELECT draining FROM {s}.instances WHERE instance_id = $1", INSTANCE)
    assert row["draining"] is True


async def test_an_active_job_is_not_safe_to_stop_until_it_ends(
    client: httpx.AsyncClient, media: Media, sample_video: Path, tmp_path: Path
) -> None:
    CapabilityFile(media.capability_file).publish(INSTANCE)
    _, task, _ = await _start_slow(media, sample_video, tmp_path)
    busy = (await client.post("/internal/drain", headers=media.operator)).json()
    assert (busy["active_jobs"], busy["safe_to_stop"], busy["reason"]) == (1, False, "work_active")
    async with media.pool.acquire() as conn:  # end the job: its lease goes away, the worker aborts
        await conn.execute(f"UPDATE {media.schema}.transcode_jobs SET lease_token = gen_random_uuid()")
    await asyncio.wait_for(task, 10)
    idle = (await client.get("/internal/drain", headers=media.operator)).json()
    assert (idle["active_jobs"], idle["safe_to_stop"]) == (0, True)


async def test_a_draining_worker_takes_no_new_job(media: Media, sample_video: Path) -> None:
    await upload(media, sample_video)
    media.activity.draining = True
    stop = asyncio.Event()
    runner = asyncio.ensure_future(media.worker().run(stop))
    await asyncio.sleep(0.3)
    stop.set()
    await asyncio.wait_for(runner, 5)
    row = await media.fetchrow("SELECT state FROM {s}.transcode_jobs")
    assert row["state"] == "pending"


async def test_an_active_upload_is_not_safe_to_stop(client: httpx.AsyncClient, media: Media) -> None:
    CapabilityFile(media.capability_file).publish(INSTANCE)
    session_id = (await init(client, media, 1000, 1000)).json()["session_id"]
    release = asyncio.Event()

    async def slow_body() -> AsyncIterator[bytes]:
        yield b"a" * 500
        await release.wait()
        yield b"a" * 500

    headers = {**media.auth(), "Content-Length": "1000"}
    put = asyncio.ensure_future(
        client.put(f"/v1/uploads/{session_id}/chunks/0", content=slow_body(), headers=headers)
    )
    await partial_files_written(media, 1)
    busy = (await client.post("/internal/drain", headers=media.operator)).json()
    assert (busy["active_uploads"], busy["safe_to_stop"]) == (1, False)
    release.set()
    assert (await put).status_code == 200
    assert (await client.get("/internal/drain", headers=media.operator)).json()["safe_to_stop"] is True


async def test_a_capability_of_another_instance_is_not_accepted(
    client: httpx.AsyncClient, media: Media
) -> None:
    CapabilityFile(media.capability_file).publish("media-test-other")
    report = (await client.post("/internal/drain", headers=media.operator)).json()
    assert (report["safe_to_stop"], report["reason"]) == (False, "capability_mismatch")
    media.capability_file.write_text(json.dumps({"pid": 1}))
    report = (await client.get("/internal/drain", headers=media.operator)).json()
    assert (report["safe_to_stop"], report["reason"]) == (False, "capability_unknown")
    media.capability_file.unlink()
    assert (await client.get("/internal/drain", headers=media.operator)).json()[
        "reason"
    ] == "capability_unknown"
