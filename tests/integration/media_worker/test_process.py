"""media-worker as real processes: a worker SIGKILLed mid-ffmpeg is taken over promptly by a restarted
instance (a new id: at the dead lease's expiry; the same id: at once), which leaves no temporary file; a
stalled chunk body is cut; the API takes the access tokens of a real OpenID provider (the session's private
ORY Hydra) for its own audience only, and an upload with another one stores nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from media_worker.domain.keys import source_key
from media_worker.domain.limits import CHUNK_MIN_BYTES
from media_worker.entrypoints.api import DRAIN_PERMISSION
from media_worker.settings import AUDIENCE
from tests.integration.media_worker.test_recovery import TAKE_OVER_SLACK_SECONDS, started_at
from tests.integration.media_worker.test_transcoder import alive, media, probe, script, upload
from tests.integration.media_worker.test_uploads import entries_under
from tests.support.issuers import HydraIssuer
from tests.support.media_uploads import BOUNDARY, multipart_body
from tests.support.media_worker_fixtures import Media, make_test_video, sha256_of
from tests.support.stack import MigratedSchema, Stack, free_port, private_file, problem_code

__all__ = ["media"]  # the video-sized limits fixture

SERVE = Path(__file__).with_name("serve_media.py")
REPO_ROOT = Path(__file__).resolve().parents[3]


class Instance:
    def __init__(self, name: str, env: dict[str, str], log: Path) -> None:
        self.name = name
        self.port = free_port()
        self.env = {
            **env,
            "MEDIA_INSTANCE_ID": name,
            "MEDIA_HTTP_PORT": str(self.port),
            "MEDIA_CAPABILITY_FILE": str(log.with_suffix(".capability")),
        }
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVE), "serve"],
            env=self.env,
            cwd=REPO_ROOT,
            stdout=self.log,
            stderr=self.log,
        )

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(30)
        self.log.close()
        return code


async def wait_for(condition: Callable[[], Awaitable[bool]], within_seconds: float) -> None:
    deadline = time.monotonic() + within_seconds
    while not await condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def ready(instance: Instance) -> bool:
    async with httpx.AsyncClient() as http:
        try:
            return (await http.get(f"http://127.0.0.1:{instance.port}/readyz", timeout=2)).status_code == 200
        except httpx.HTTPError:
            return False


@pytest.fixture(scope="session")
def long_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 s at 10 fps: read at its native rate (`-re`) it keeps ffmpeg busy long enough to be killed."""
    return make_test_video(tmp_path_factory.mktemp("video") / "long.mp4", seconds=12, size="320x180", rate=10)


@pytest.fixture
def base_env(
    stack: Stack, hydra: HydraIssuer, media_schema: MigratedSchema, media: Media, tmp_path: Path
) -> dict[str, str]:
    """A real media-worker on the test schema with the production rescan period (60 s). With SLOW_FFMPEG
    set, ffmpeg reads its input at the native frame rate, so a render takes as long as the video."""
    return {
        **os.environ,
        "YOVISION_TEST_MEDIA_SCHEMA": media_schema.name,
        "MEDIA_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
        "MEDIA_DATABASE_DSN_FILE": str(
            private_file(tmp_path / "runtime.dsn", media_schema.runtime_dsn + "\n")
        ),
        "MEDIA_AUTH_ISSUER": hydra.issuer,
        "MEDIA_OUTBOX_RELAY_ENABLED": "false",
        "MEDIA_STORAGE_DIR": str(media.storage.root),
        "MEDIA_FFMPEG_PATH": script(
            tmp_path / "ffmpeg-wrapper",
            f"echo $$ >> {tmp_path / 'ffmpeg.pids'}\n"
            'if [ -n "$SLOW_FFMPEG" ]; then exec ffmpeg -re "$@"; fi\nexec ffmpeg "$@"\n',
        ),
    }


def video_streams(path: Path) -> tuple[list[dict[str, object]], float]:
    info = probe(path)
    streams = [s for s in info["streams"] if s["codec_type"] == "video"]  # type: ignore[attr-defined, index]
    return streams, float(info["format"]["duration"]) if "duration" in info["format"] else 0.0  # type: ignore[index, operator]


@pytest.mark.parametrize(
    ("restart_id", "lease_seconds"),
    [
        ("media-proc-b", 8),  # a new process id (the default): taken over at the dead lease's expiry
        ("media-proc-a", 30),  # the same MEDIA_INSTANCE_ID: its predecessor's job is taken over at once
    ],
)
async def test_a_worker_killed_mid_ffmpeg_is_taken_over_promptly_and_leaves_no_temporary_file(
    media: Media,
    long_video: Path,
    base_env: dict[str, str],
    tmp_path: Path,
    restart_id: str,
    lease_seconds: int,
) -> None:
    env = {**base_env, "MEDIA_JOB_LEASE_SECONDS": str(lease_seconds)}
    material_id = await upload(media, long_video)
    source = media.storage.local_path(source_key(material_id))
    digest = sha256_of(source)
    work = media.storage.root / "work"

    first = Instance("media-proc-a", {**env, "SLOW_FFMPEG": "1"}, tmp_path / "first.log")
    try:
        # mid-ffmpeg: the cover is written and the preview is half written
        await wait_for(
            lambda: asyncio.sleep(0, any(p.stat().st_size for p in work.glob("*/preview.mp4"))), 60
        )
        first.proc.kill()
        first.proc.wait(10)
    finally:
        first.stop()
    for pid in map(int, (tmp_path / "ffmpeg.pids").read_text().split()):  # ffmpeg died with its worker
        await wait_for(lambda pid=pid: asyncio.sleep(0, not alive(pid)), 5)  # type: ignore[misc]
    dead = await media.fetchrow("SELECT lease_owner, lease_expires_at FROM {s}.transcode_jobs")
    assert dead["lease_owner"] == "media-proc-a"
    assert [p.name for p in sorted(work.glob("*/*"))] == ["cover.jpg", "preview.mp4"]

    second = Instance(restart_id, env, tmp_path / "second.log")
    try:
        await wait_for(lambda: ready(second), 60)
        ready_at = datetime.now(UTC)
        started = await started_at(media, 2)
        await wait_for(lambda: done(media), 120)
        async with httpx.AsyncClient() as http:
            health = await http.get(f"http://127.0.0.1:{second.port}/readyz")
            metrics = (await http.get(f"http://127.0.0.1:{second.port}/metrics")).text
        assert health.status_code == 200, health.text
        assert 'media_transcodes_total{outcome="done"} 1.0' in metrics
        assert 'media_active_work{kind="jobs"} 0.0' in metrics
    finally:
        assert second.stop() == 0
    if restart_id == first.name:
        assert started < dead["lease_expires_at"], "the predecessor's lease was not released at once"
    else:
        # Never before the dead lease expires; then as soon as the new process can act: at the expiry, or
        # when it is ready if it started later than that (a loaded machine starts Python slowly).
        assert started >= dead["lease_expires_at"], "taken over before the dead lease expired"
        delay = (started - max(dead["lease_expires_at"], ready_at)).total_seconds()
        assert delay < TAKE_OVER_SLACK_SECONDS, delay

    assert entries_under(work) == []
    assert list(media.storage.root.rglob("*.partial")) == []
    row = await media.fetchrow("SELECT * FROM {s}.materials WHERE id = $1", material_id)
    recorded = [media.storage.local_path(row[c]) for c in ("cover_ref", "preview_ref", "clip_ref")]
    assert entries_under(media.storage.root / "outputs") == sorted(
        [recorded[0].parent.parent, recorded[0].parent, *recorded]
    )
    cover, _ = video_streams(recorded[0])
    assert (cover[0]["width"], cover[0]["height"]) == (320, 180)
    preview, preview_seconds = video_streams(recorded[1])
    assert preview[0]["height"] == 720 and abs(preview_seconds - 12.0) < 0.5
    clip, clip_seconds = video_streams(recorded[2])
    assert clip[0]["height"] == 720 and abs(clip_seconds - 10.0) < 0.5
    assert sha256_of(source) == digest
    job = await media.fetchrow("SELECT * FROM {s}.transcode_jobs")
    assert (job["state"], job["attempt"], job["lease_owner"]) == ("done", 2, None)
    events = await media.fetch("SELECT event_type FROM {s}.outbox ORDER BY id")
    assert [e["event_type"] for e in events] == [
        "MaterialUploaded",
        "TranscodeStarted",
        "TranscodeStarted",
        "TranscodeCompleted",
    ]


async def done(media: Media) -> bool:
    status = (await media.fetchrow("SELECT status FROM {s}.materials"))["status"]
    assert status != "failed"
    return bool(status == "done")


async def test_a_stalled_chunk_body_is_answered_408_once_it_falls_behind_the_minimum_rate(
    base_env: dict[str, str], hydra: HydraIssuer, tmp_path: Path
) -> None:
    env = {**base_env, "MEDIA_UPLOAD_READ_GRACE_SECONDS": "1", "MEDIA_UPLOAD_MIN_BYTES_PER_SECOND": "1024"}
    instance = Instance("media-stall", env, tmp_path / "stall.log")
    token = await hydra.user_token("alice", [], [AUDIENCE])
    base = f"http://127.0.0.1:{instance.port}"
    try:
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
            await wait_for(lambda: ready(instance), 30)
            spec = {"upload_key": "stall", "total_bytes": 2 * CHUNK_MIN_BYTES, "chunk_bytes": CHUNK_MIN_BYTES}
            session = await http.post("/v1/uploads", json=spec)
            assert session.status_code == 201, session.text
            session_id = session.json()["session_id"]
        reader, writer = await asyncio.open_connection("127.0.0.1", instance.port)
        head = (
            f"PUT /v1/uploads/{session_id}/chunks/0 HTTP/1.1\r\nHost: media\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Length: {CHUNK_MIN_BYTES}\r\n\r\n"
        )
        started = time.monotonic()
        writer.write(head.encode() + b"x" * 100)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 20)
        took = time.monotonic() - started
        rest = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert status_line.startswith(b"HTTP/1.1 408"), status_line
        assert 1.0 <= took < 10.0  # grace 1 s + 100 bytes at 1 KiB/s, plus scheduling
        assert b'"code":"request_timeout"' in rest
    finally:
        assert instance.stop() == 0


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_token_for_another_service_is_401_and_one_without_media_drain_is_403(
    media: Media, base_env: dict[str, str], hydra: HydraIssuer, tmp_path: Path
) -> None:
    """Hydra's own tokens through the real process: alice's token for signal-watcher is refused even where it
    grants `media:drain`, and her upload with it stores nothing; hers for this service without the
    permission is 403 on the drain endpoints; the operator CLI's machine token with it is served."""
    foreign = bearer(await hydra.user_token("alice", [DRAIN_PERMISSION], ["signal-watcher"]))
    alice = bearer(await hydra.user_token("alice", [], [AUDIENCE]))
    operator = bearer(await hydra.machine_token("operator-cli", [DRAIN_PERMISSION], [AUDIENCE]))
    multipart = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    instance = Instance("media-access", base_env, tmp_path / "access.log")
    try:
        await wait_for(lambda: ready(instance), 60)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{instance.port}") as http:
            upload = await http.post(
                "/v1/materials", content=multipart_body(b"v" * 1000), headers={**foreign, **multipart}
            )
            listed = await http.get("/v1/materials", headers=foreign)
            drain = await http.post("/internal/drain", headers=foreign)
            lacking = await http.post("/internal/drain", headers=alice)
            report = await http.get("/internal/drain", headers=operator)
            own = await http.get("/v1/materials", headers=alice)
    finally:
        assert instance.stop() == 0
    for refused in (upload, listed, drain):
        assert (refused.status_code, problem_code(refused)) == (401, "unauthorized")
    assert (lacking.status_code, problem_code(lacking)) == (403, "forbidden")
    assert report.status_code == 200 and report.json()["draining"] is False, report.text
    assert own.status_code == 200 and own.json()["items"] == []
    assert [p for p in media.storage.root.rglob("*") if p.is_file()] == []
    assert await media.fetch("SELECT id FROM {s}.materials") == []
