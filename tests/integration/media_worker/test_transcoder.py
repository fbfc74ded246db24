"""Transcode worker with real ffmpeg/ffprobe on a small generated video, on real PostgreSQL."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import stat
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from media_worker.adapters.unit_of_work import PostgresMediaUnitOfWork
from media_worker.domain.keys import source_key
from media_worker.entrypoints.transcode_worker import TranscodeWorker
from tests.integration.media_worker.test_uploads import files_under
from tests.support.media_worker_fixtures import VIDEO_LIMITS, Media, build_media, sha256_of
from tests.support.stack import MigratedSchema, problem_code


@pytest.fixture
def media(pool: asyncpg.Pool, media_schema: MigratedSchema, tmp_path: Path) -> Media:
    return build_media(pool, media_schema.name, tmp_path, VIDEO_LIMITS)


async def upload(media: Media, video: Path) -> uuid.UUID:
    data = await asyncio.to_thread(video.read_bytes)

    async def body() -> AsyncIterator[bytes]:
        yield data

    return await media.use_cases.uploads.upload_plain(
        "user-1", "sample", "video/mp4", body(), request_length=str(len(data))
    )


def script(path: Path, text: str) -> str:
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def probe(path: Path) -> dict[str, object]:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-print_format", "json", "-show_format", "-show_streams", str(path)],
        check=True,
        capture_output=True,
    ).stdout
    parsed: dict[str, object] = json.loads(out)
    return parsed


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat").read_text().split()[2]
    return status != "Z"


async def event_types(media: Media) -> list[str]:
    return [r["event_type"] for r in await media.fetch("SELECT event_type FROM {s}.outbox ORDER BY id")]


async def test_a_job_produces_verified_cover_preview_and_clip_and_keeps_the_source(
    media: Media, sample_video: Path
) -> None:
    material_id = await upload(media, sample_video)
    source = media.storage.local_path(source_key(material_id))
    digest = sha256_of(source)
    assert await media.worker().run_once() is True
    row = await media.fetchrow("SELECT * FROM {s}.materials WHERE id = $1", material_id)
    assert (row["status"], row["progress"], row["error_code"]) == ("done", 100, None)
    preview = probe(media.storage.local_path(row["preview_ref"]))
    assert [s["height"] for s in preview["streams"] if s["codec_type"] == "video"] == [720]  # type: ignore[index, union-attr]
    clip = probe(media.storage.local_path(row["clip_ref"]))
    assert 0 < float(clip["format"]["duration"]) <= 10.5  # type: ignore[index]
    assert media.storage.local_path(row["cover_ref"]).stat().st_size > 0
    assert sha256_of(source) == digest
    assert await event_types(media) == ["MaterialUploaded", "TranscodeStarted", "TranscodeCompleted"]
    job = await media.fetchrow("SELECT * FROM {s}.transcode_jobs WHERE material_id = $1", material_id)
    assert (job["state"], job["attempt"], job["lease_owner"]) == ("done", 1, None)
    assert files_under(media.storage.root / "work") == []
    assert await media.worker().run_once() is False


async def _start_slow(
    media: Media, sample_video: Path, tmp_path: Path, **kwargs: float
) -> tuple[uuid.UUID, asyncio.Task[bool], Path]:
    material_id = await upload(media, sample_video)
    pid_file = tmp_path / "ffmpeg.pid"
    slow = script(tmp_path / "ffmpeg-slow", f"echo $$ > {pid_file}\nexec sleep 60\n")
    task = asyncio.ensure_future(media.worker(slow, **kwargs).run_once())
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.05)
    return material_id, task, pid_file


async def test_a_stolen_lease_kills_ffmpeg_and_writes_nothing(
    media: Media, sample_video: Path, tmp_path: Path
) -> None:
    material_id, task, pid_file = await _start_slow(media, sample_video, tmp_path, lease_seconds=3.0)
    pid = int(pid_file.read_text())
    assert alive(pid)
    async with media.pool.acquire() as conn:
        await conn.execute(
            f"UPDATE {media.schema}.transcode_jobs SET lease_owner = 'thief', lease_token = gen_random_uuid()"
        )
    assert await asyncio.wait_for(task, 10) is True
    assert not alive(pid)
    row = await media.fetchrow("SELECT * FROM {s}.materials WHERE id = $1", material_id)
    assert row["status"] == "processing"
    assert (row["cover_ref"], row["preview_ref"], row["clip_ref"]) == (None, None, None)
    job = await media.fetchrow("SELECT * FROM {s}.transcode_jobs")
    assert (job["state"], job["lease_owner"]) == ("running", "thief")
    assert await event_types(media) == ["MaterialUploaded", "TranscodeStarted"]
    assert media.storage.local_path(source_key(material_id)).is_file()


async def test_a_worker_paused_past_its_lease_is_fenced_and_a_successor_finishes(
    media: Media, sample_video: Path, tmp_path: Path
) -> None:
    material_id, task, pid_file = await _start_slow(media, sample_video, tmp_path, lease_seconds=3.0)
    pid = int(pid_file.read_text())
    # As if the worker had been paused: its lease expires without a renewal; another instance claims it.
    async with media.pool.acquire() as conn:
        await conn.execute(
            f"UPDATE {media.schema}.transcode_jobs SET lease_expires_at = now() - interval '1 second'"
        )
    successor = media.worker(instance_id="media-test-b")
    await asyncio.wait_for(task, 10)
    assert not alive(pid)
    assert await successor.run_once() is True
    row = await media.fetchrow("SELECT * FROM {s}.materials WHERE id = $1", material_id)
    assert row["status"] == "done"
    job = await media.fetchrow("SELECT * FROM {s}.transcode_jobs")
    assert (job["state"], job["attempt"]) == ("done", 2)
    assert await event_types(media) == [
        "MaterialUploaded",
        "TranscodeStarted",
        "TranscodeStarted",
        "TranscodeCompleted",
    ]


async def test_start_up_recovery_picks_up_a_job_abandoned_by_a_dead_instance(
    media: Media, sample_video: Path
) -> None:
    material_id = await upload(media, sample_video)
    async with media.pool.acquire() as conn:
        await conn.execute(
            f"""UPDATE {media.schema}.transcode_jobs SET state = 'running', attempt = 1, lease_owner = 'dead',
                   lease_token = gen_random_uuid(), lease_expires_at = now() - interval '1 second'"""
        )
        await conn.execute(f"UPDATE {media.schema}.materials SET status = 'processing', progress = 72")
    stop = asyncio.Event()
    runner = asyncio.ensure_future(TranscodeWorker(media.worker()).run(stop))
    for _ in range(200):
        row = await media.fetchrow("SELECT status FROM {s}.materials WHERE id = $1", material_id)
        if row["status"] == "done":
            break
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(runner, 10)
    assert row["status"] == "done"


async def test_stopping_the_worker_kills_ffmpeg_and_hands_the_job_back(
    media: Media, sample_video: Path, tmp_path: Path
) -> None:
    material_id = await upload(media, sample_video)
    pid_file = tmp_path / "ffmpeg.pid"
    slow = script(tmp_path / "ffmpeg-slow", f"echo $$ > {pid_file}\nexec sleep 60\n")
    stop = asyncio.Event()
    runner = asyncio.ensure_future(TranscodeWorker(media.worker(slow)).run(stop))
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.05)
    pid = int(pid_file.read_text())
    stop.set()
    await asyncio.wait_for(runner, 10)
    assert not alive(pid)
    job = await media.fetchrow("SELECT * FROM {s}.transcode_jobs")
    assert (job["state"], job["lease_owner"]) == ("pending", None)
    row = await media.fetchrow("SELECT status FROM {s}.materials WHERE id = $1", material_id)
    assert row["status"] == "pending"
    assert media.storage.local_path(source_key(material_id)).is_file()


async def test_a_database_outage_only_waits_for_the_next_round(
    media: Media, media_schema: MigratedSchema, caplog: pytest.LogCaptureFixture
) -> None:
    broken = await asyncpg.create_pool(media_schema.runtime_dsn, min_size=1, max_size=1)
    assert broken is not None
    await broken.close()
    worker = media.worker()
    worker.uow = functools.partial(PostgresMediaUnitOfWork, broken, media.schema)
    stop = asyncio.Event()
    caplog.set_level(logging.WARNING, logger="media_worker")

    def failed_rounds() -> int:
        return sum(
            1 for r in caplog.records if r.getMessage() == "transcode round failed; waiting for the next"
        )

    runner = asyncio.ensure_future(TranscodeWorker(worker).run(stop))
    deadline = time.monotonic() + 20
    while failed_rounds() < 2:  # two rounds met the outage and the worker carried on
        assert not runner.done() and time.monotonic() < deadline
        await asyncio.sleep(0.05)
    assert not runner.done()
    worker.uow = media.uow
    stop.set()
    await asyncio.wait_for(runner, 5)


async def test_outputs_are_streamed_to_their_owner_once_done(
    client: httpx.AsyncClient, media: Media, sample_video: Path
) -> None:
    material_id = await upload(media, sample_video)
    early = await client.get(f"/v1/materials/{material_id}/outputs/preview_720p", headers=media.auth())
    assert (early.status_code, problem_code(early)) == (404, "not_found")
    await media.worker().run_once()
    status = (await client.get(f"/v1/materials/{material_id}", headers=media.auth())).json()
    assert (status["status"], status["progress"], status["outputs"]) == (
        "done",
        100,
        ["clip_10s", "cover", "preview_720p"],
    )
    assert status["source_key"] is None
    preview = await client.get(f"/v1/materials/{material_id}/outputs/preview_720p", headers=media.auth())
    assert (preview.status_code, preview.headers["content-type"]) == (200, "video/mp4")
    assert len(preview.content) > 0
    other = await client.get(f"/v1/materials/{material_id}/outputs/cover", headers=media.auth("user-2"))
    assert other.status_code == 404
