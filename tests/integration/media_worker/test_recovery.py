"""Recovery of dead transcode attempts on real PostgreSQL with real ffmpeg: a job whose lease expires is
taken over within about a second of the expiry (not at the next 60 s rescan), a restart with the same
instance id takes its predecessor's jobs over at once, and no dead attempt's temporary file survives."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import asyncpg

from media_worker.domain.keys import output_key, work_folder_name
from media_worker.entrypoints.transcode_worker import TranscodeWorker
from media_worker.service_layer.transcoder import RESCAN_SECONDS
from tests.integration.media_worker.test_transcoder import media, upload
from tests.integration.media_worker.test_uploads import entries_under
from tests.support.media_worker_fixtures import INSTANCE, Media

__all__ = ["media"]  # the video-sized limits fixture

TAKE_OVER_SLACK_SECONDS = 3.0  # the take-over must start this soon after the dead lease's expiry
WAIT_SECONDS = 60.0


async def abandon(
    media: Media, material_id: uuid.UUID, *, owner: str, expires_in: float
) -> tuple[uuid.UUID, uuid.UUID, datetime]:
    """Make the material's job look like a crashed attempt: running, leased to `owner` for `expires_in`."""
    async with media.pool.acquire() as conn:
        row = await conn.fetchrow(
            f"""UPDATE {media.schema}.transcode_jobs SET state = 'running', attempt = 1, lease_owner = $2,
                       lease_token = gen_random_uuid(), lease_expires_at = now() + make_interval(secs => $3)
                 WHERE material_id = $1 RETURNING id, lease_token, lease_expires_at""",
            material_id,
            owner,
            expires_in,
        )
        await conn.execute(
            f"UPDATE {media.schema}.materials SET status = 'processing' WHERE id = $1", material_id
        )
    assert row is not None
    return row["id"], row["lease_token"], row["lease_expires_at"]


def plant_attempt_files(
    media: Media, job_id: uuid.UUID, material_id: uuid.UUID, token: uuid.UUID
) -> list[Path]:
    """What an attempt killed mid-ffmpeg (or mid-store) leaves: a work folder with a cover and a broken
    preview, and an outputs folder with a partial file."""
    work = media.storage.local_path(f"work/{work_folder_name(job_id, token)}")
    work.mkdir(parents=True)
    (work / "cover.jpg").write_bytes(b"\xff\xd8 partial")
    (work / "preview.mp4").write_bytes(b"\x00\x00\x00\x18ftypisom broken")
    stored = media.storage.local_path(output_key(material_id, token, "cover.jpg"))
    stored.parent.mkdir(parents=True)
    stored.with_name("cover.jpg.0123abcd.partial").write_bytes(b"partial")
    return [work, stored.parent]


async def started_at(media: Media, attempt: int) -> datetime:
    """When (DB clock) the given attempt's TranscodeStarted was written; waits for it, bounded."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        rows = await media.fetch(
            "SELECT created_at FROM {s}.outbox WHERE event_type = 'TranscodeStarted' ORDER BY id"
        )
        if len(rows) >= attempt:
            return rows[attempt - 1]["created_at"]
        assert time.monotonic() < deadline, "the job was not taken over"
        await asyncio.sleep(0.05)


async def until_done(media: Media, material_id: uuid.UUID) -> asyncpg.Record:
    deadline = time.monotonic() + WAIT_SECONDS
    while (row := await media.fetchrow("SELECT * FROM {s}.materials WHERE id = $1", material_id))[
        "status"
    ] != "done":
        assert row["status"] != "failed" and time.monotonic() < deadline, row["status"]
        await asyncio.sleep(0.05)
    return row


class Running:
    def __init__(self, media: Media, **kwargs: object) -> None:
        self.stop = asyncio.Event()
        self.task = asyncio.ensure_future(TranscodeWorker(media.worker(**kwargs)).run(self.stop))  # type: ignore[arg-type]

    async def close(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, 20)


async def test_a_job_whose_lease_expires_is_taken_over_within_a_second_of_expiry_not_at_the_rescan(
    media: Media, sample_video: Path
) -> None:
    material_id = await upload(media, sample_video)
    _, _, expires_at = await abandon(media, material_id, owner="media-dead", expires_in=2.0)
    worker = Running(media, rescan_seconds=RESCAN_SECONDS)  # start-up round runs before the expiry
    try:
        started = await started_at(media, 1)
        await until_done(media, material_id)
    finally:
        await worker.close()
    assert expires_at <= started < expires_at + timedelta(seconds=TAKE_OVER_SLACK_SECONDS), (
        started - expires_at
    )


async def test_a_taken_over_attempt_leaves_no_temporary_file_and_live_attempts_keep_theirs(
    media: Media, sample_video: Path
) -> None:
    dead_material, live_material, done_material = [await upload(media, sample_video) for _ in range(3)]
    job, token, _ = await abandon(media, dead_material, owner="media-dead", expires_in=-1.0)
    planted = plant_attempt_files(media, job, dead_material, token)
    live_job, live_token, _ = await abandon(media, live_material, owner="media-other", expires_in=120.0)
    live_files = plant_attempt_files(media, live_job, live_material, live_token)
    kept_token, dead_token = uuid.uuid4(), uuid.uuid4()
    kept_output = media.storage.local_path(output_key(done_material, kept_token, "cover.jpg"))
    kept_output.parent.mkdir(parents=True)
    kept_output.write_bytes(b"the recorded cover")
    stray = media.storage.local_path(output_key(done_material, dead_token, "cover.jpg"))
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"an unrecorded cover of a dead attempt")
    async with media.pool.acquire() as conn:
        await conn.execute(
            f"""UPDATE {media.schema}.materials SET status = 'done', cover_ref = $2, preview_ref = $2,
                       clip_ref = $2 WHERE id = $1""",
            done_material,
            output_key(done_material, kept_token, "cover.jpg"),
        )
        await conn.execute(
            f"UPDATE {media.schema}.transcode_jobs SET state = 'done' WHERE material_id = $1", done_material
        )

    worker = Running(media, rescan_seconds=RESCAN_SECONDS)
    try:
        row = await until_done(media, dead_material)
    finally:
        await worker.close()
    assert not any(p.exists() for p in planted)
    recorded = [media.storage.local_path(row[c]) for c in ("cover_ref", "preview_ref", "clip_ref")]
    assert entries_under(media.storage.root / "outputs" / str(dead_material)) == sorted(
        [recorded[0].parent, *recorded]
    )  # only the finishing attempt's recorded outputs
    assert all(p.exists() for p in live_files)  # a live attempt of another instance keeps its folders
    assert kept_output.exists() and not stray.parent.exists()
    assert list(media.storage.root.rglob("*.partial")) == [
        media.storage.local_path(output_key(live_material, live_token, "cover.jpg.0123abcd.partial"))
    ]


async def test_a_restart_with_the_same_instance_id_takes_its_predecessors_jobs_over_at_once(
    media: Media, sample_video: Path
) -> None:
    material_id = await upload(media, sample_video)
    job, token, expires_at = await abandon(media, material_id, owner=INSTANCE, expires_in=120.0)
    planted = plant_attempt_files(media, job, material_id, token)
    worker = Running(media, instance_id=INSTANCE, rescan_seconds=RESCAN_SECONDS)
    try:
        started = await started_at(media, 1)
        await until_done(media, material_id)
    finally:
        await worker.close()
    assert started < expires_at - timedelta(seconds=60)
    assert not any(p.exists() for p in planted)


async def test_a_predecessor_lease_is_kept_while_a_live_session_holds_the_material(
    media: Media, sample_video: Path
) -> None:
    material_id = await upload(media, sample_video)
    _, token, _ = await abandon(media, material_id, owner=INSTANCE, expires_in=120.0)
    recovery = media.worker(instance_id=INSTANCE).recovery
    async with media.locks.material(material_id) as live_executor:  # e.g. a second process with this id
        assert live_executor
        assert await recovery.release_predecessor_leases() == 0
        lease = await media.fetchrow("SELECT lease_owner, lease_token, state FROM {s}.transcode_jobs")
        assert (lease["lease_owner"], lease["lease_token"], lease["state"]) == (INSTANCE, token, "running")
    assert await media.worker(instance_id="media-test-other").recovery.release_predecessor_leases() == 0
    assert await recovery.release_predecessor_leases() == 1
    released = await media.fetchrow(
        """SELECT j.state, j.lease_owner, m.status
             FROM {s}.transcode_jobs j JOIN {s}.materials m ON m.id = j.material_id"""
    )
    assert tuple(released) == ("pending", None, "pending")
