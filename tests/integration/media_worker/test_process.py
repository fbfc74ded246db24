"""media-worker as real processes: a worker SIGKILLed mid-ffmpeg; another instance finishes the job."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from media_worker.adapters.storage import source_key
from tests.conftest import MigratedSchema, Stack, free_port, private_file
from tests.integration.media_worker.conftest import Media, sha256_of
from tests.integration.media_worker.test_transcoder import alive, media, probe, script, upload
from yovision_platform.auth import TokenVerifier

__all__ = ["media"]  # the video-sized limits fixture

SERVE = Path(__file__).with_name("serve_media.py")
REPO_ROOT = Path(__file__).resolve().parents[3]
LEASE_SECONDS = 3


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


@pytest.fixture
def base_env(stack: Stack, media_schema: MigratedSchema, media: Media, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "YOVISION_TEST_MEDIA_SCHEMA": media_schema.name,
        "MEDIA_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
        "MEDIA_DATABASE_DSN_FILE": str(
            private_file(tmp_path / "runtime.dsn", media_schema.runtime_dsn + "\n")
        ),
        "MEDIA_AUTH_JWT_KEY_FILE": str(private_file(tmp_path / "jwt.key", secrets.token_hex(32) + "\n")),
        "MEDIA_AUTH_JWT_ISSUER": "yovision-test",
        "MEDIA_OUTBOX_RELAY_ENABLED": "false",
        "MEDIA_STORAGE_DIR": str(media.storage.root),
        "MEDIA_JOB_LEASE_SECONDS": str(LEASE_SECONDS),
        "MEDIA_RESCAN_SECONDS": "0.5",
        "MEDIA_FFMPEG_PATH": script(
            tmp_path / "ffmpeg-wrapper",
            f"echo $$ >> {tmp_path / 'ffmpeg.pids'}\n"
            'if [ -n "$SLOW_FFMPEG" ]; then sleep 60; fi\nexec ffmpeg "$@"\n',
        ),
    }


async def test_a_worker_killed_mid_ffmpeg_is_replaced_after_its_lease_expires(
    media: Media, sample_video: Path, base_env: dict[str, str], tmp_path: Path
) -> None:
    material_id = await upload(media, sample_video)
    source = media.storage.local_path(source_key(material_id))
    digest = sha256_of(source)
    pids = tmp_path / "ffmpeg.pids"

    first = Instance("media-proc-a", {**base_env, "SLOW_FFMPEG": "1"}, tmp_path / "a.log")
    try:
        await wait_for(lambda: asyncio.sleep(0, pids.exists() and pids.read_text().strip() != ""), 30)
        ffmpeg_pid = int(pids.read_text().split()[0])
        row = await media.fetchrow("SELECT lease_owner, state FROM {s}.transcode_jobs")
        assert (row["lease_owner"], row["state"]) == ("media-proc-a", "running")
        first.proc.kill()
        first.proc.wait(10)
    finally:
        first.stop()
    # the orphaned ffmpeg dies with its worker: no second live executor
    await wait_for(lambda: asyncio.sleep(0, not alive(ffmpeg_pid)), 5)

    second = Instance("media-proc-b", base_env, tmp_path / "b.log")
    try:

        async def done() -> bool:
            status = (await media.fetchrow("SELECT status FROM {s}.materials"))["status"]
            assert status != "failed"
            return bool(status == "done")

        await wait_for(done, LEASE_SECONDS + 60)
        async with httpx.AsyncClient() as http:
            health = await http.get(f"http://127.0.0.1:{second.port}/readyz")
            metrics = (await http.get(f"http://127.0.0.1:{second.port}/metrics")).text
        assert health.status_code == 200, health.text
        assert 'media_transcodes_total{outcome="done"} 1.0' in metrics
        assert 'media_active_work{kind="jobs"} 0.0' in metrics
    finally:
        assert second.stop() == 0
    row = await media.fetchrow("SELECT * FROM {s}.materials WHERE id = $1", material_id)
    assert probe(media.storage.local_path(row["preview_ref"]))["streams"]
    job = await media.fetchrow("SELECT * FROM {s}.transcode_jobs")
    assert (job["state"], job["attempt"], job["lease_owner"]) == ("done", 2, None)
    assert sha256_of(source) == digest
    started = await media.fetch("SELECT event_type FROM {s}.outbox WHERE event_type = 'TranscodeStarted'")
    assert len(started) == 2


async def test_a_stalled_chunk_body_is_answered_408_once_it_falls_behind_the_minimum_rate(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**base_env, "MEDIA_UPLOAD_READ_GRACE_SECONDS": "1", "MEDIA_UPLOAD_MIN_BYTES_PER_SECOND": "1024"}
    instance = Instance("media-stall", env, tmp_path / "stall.log")
    key_text = await asyncio.to_thread(Path(env["MEDIA_AUTH_JWT_KEY_FILE"]).read_text)
    key = bytes.fromhex(key_text.strip())
    token = TokenVerifier(key, issuer="yovision-test", audience="media-worker").mint("alice")
    base = f"http://127.0.0.1:{instance.port}"
    try:
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:

            async def ready() -> bool:
                try:
                    return (await http.get("/readyz")).status_code == 200
                except httpx.TransportError:
                    return False

            await wait_for(ready, 30)
            spec = {"upload_key": "stall", "total_bytes": 2 * 65_536, "chunk_bytes": 65_536}
            session = await http.post("/v1/uploads", json=spec)
            assert session.status_code == 201, session.text
            session_id = session.json()["session_id"]
        reader, writer = await asyncio.open_connection("127.0.0.1", instance.port)
        head = (
            f"PUT /v1/uploads/{session_id}/chunks/0 HTTP/1.1\r\nHost: media\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/octet-stream\r\n"
            "Content-Length: 65536\r\n\r\n"
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
