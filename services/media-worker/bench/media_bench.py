"""Benchmark: transcode wall time through the service vs the same ffmpeg commands run directly, and the
chunked upload throughput of a large file with the API process's peak RSS.

    .venv/bin/python services/media-worker/bench/media_bench.py [--video-seconds 20] [--upload-mib 1024]

Runs `media-worker serve` (the real composition root) as a child process on a fresh schema of the local
stack with its own storage folder, both removed afterwards, and a private ORY Hydra as its OpenID provider
(`tools.hydra.private_hydra`, the environment's clients): the bench signs a user in through it, as `make
dev-token` does, and sends that real access token. Transcode: a lavfi test video is uploaded, and
the time from the upload's response to status `done` (polled every 50 ms) is compared with running the
three ffmpeg commands of `OUTPUTS` directly, in the same run (goal: ratio <= 1.1). Upload: a file of
`--upload-mib` MiB in 20 MiB chunks (4 in flight), then `complete`; throughput includes the merge. Peak RSS
is the API process's VmHWM (it must stay far below the file size).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import httpx

from media_worker.adapters.ffmpeg import render_argv
from media_worker.domain.limits import CHUNK_MAX_BYTES, MIB
from media_worker.domain.outputs import OUTPUTS
from yovision_platform.localstack import LocalStack, runtime_dsn
from yovision_platform.storage import Identifier, SchemaPlan, drop, migrate
from yovision_platform.tools import hydra, identity_provider
from yovision_platform.tools.bench_runner import run_cleanly
from yovision_platform.tools.localhost import free_port, write_private_file
from yovision_platform.tools.sample_video import make_sample_video
from yovision_platform.web import AUDIENCES

REPO_ROOT = Path(__file__).resolve().parents[3]
MIGRATIONS = REPO_ROOT / "services/media-worker/src/media_worker/migrations"
GOAL_RATIO = 1.1
AUDIENCE = "media-worker"
BENCH_USER = "bench-user"
CLIENTS = identity_provider.clients(hydra.UNSERVED_CONSOLE_URL, AUDIENCES)  # the environment's own
USERS = next(c for c in CLIENTS if c.client_id == identity_provider.DEV_TOKEN_CLIENT)
UPLOAD_CONCURRENCY = 4
SERVE = (
    "import dataclasses, os, sys\n"
    "from media_worker.entrypoints.main import SPEC\n"
    "from yovision_platform.web import main\n"
    "sys.exit(main(dataclasses.replace(SPEC, schema=os.environ['BENCH_MEDIA_SCHEMA']), ['serve']))\n"
)


def direct_transcode_seconds(video: Path, work: Path) -> float:
    started = time.monotonic()
    for output in OUTPUTS:
        subprocess.run(render_argv("ffmpeg", video, output, work / output.file_name), check=True)
    return time.monotonic() - started


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def wait_done(pool: asyncpg.Pool, schema: str, material_id: str) -> None:
    while True:
        status = await pool.fetchval(
            f'SELECT status FROM "{schema}".materials WHERE id = $1', uuid.UUID(material_id)
        )
        if status in ("done", "failed"):
            if status == "failed":
                raise RuntimeError("transcode failed")
            return
        await asyncio.sleep(0.05)


async def signed_in(identity: hydra.PrivateHydra) -> dict[str, str]:
    """Fresh headers of the bench's user (its uploads are that `sub`'s): an access token for this service
    from signing in through the private Hydra, as `make dev-token` does. Each phase takes its own, so a
    long run never outlives one (Hydra's access tokens live 15 minutes)."""
    tokens = await hydra.signed_in_tokens(
        identity.instance.issuer,
        identity.admin,
        USERS,
        identity.client_secrets[USERS.client_id],
        subject=BENCH_USER,
        permissions=[],
        audiences=[AUDIENCE],
    )
    return {"Authorization": f"Bearer {tokens.access_token}"}


async def run(video_seconds: int, upload_mib: int) -> None:
    stack = LocalStack.load(REPO_ROOT / ".local")
    schema = Identifier(f"bench_media_{uuid.uuid4().hex[:8]}")
    password = secrets.token_urlsafe(24)
    plan = SchemaPlan.for_service(schema, MIGRATIONS)
    admin = await asyncpg.connect(stack.admin_dsn)
    work = Path(tempfile.mkdtemp(prefix="media-bench-"))
    try:
        await migrate(admin, plan, runtime_password=password)
        dsn = runtime_dsn(stack.admin_dsn, plan.runtime_role, password)
        async with hydra.private_hydra(stack.admin_dsn, work / "hydra", CLIENTS) as identity:
            await measure(identity, stack.kafka_bootstrap, schema, dsn, work, video_seconds, upload_mib)
    finally:
        await drop(admin, plan)
        await admin.close()
        shutil.rmtree(work, ignore_errors=True)


async def measure(
    identity: hydra.PrivateHydra,
    kafka_bootstrap: str,
    schema: str,
    dsn: str,
    work: Path,
    video_seconds: int,
    upload_mib: int,
) -> None:
    """Both runs against `media-worker serve` on `schema`, taking the private Hydra's access tokens."""
    port = free_port()
    env = {
        **os.environ,
        "BENCH_MEDIA_SCHEMA": schema,
        "MEDIA_HTTP_PORT": str(port),
        "MEDIA_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "MEDIA_DATABASE_DSN_FILE": str(write_private_file(work / "runtime.dsn", dsn + "\n")),
        "MEDIA_AUTH_ISSUER": identity.instance.issuer,
        "MEDIA_OUTBOX_RELAY_ENABLED": "false",
        "MEDIA_STORAGE_DIR": str(work / "storage"),
        "MEDIA_CAPABILITY_FILE": str(work / "capability"),
        "MEDIA_LOG_LEVEL": "WARNING",
    }
    video = work / "video.mp4"
    make_sample_video(video, seconds=video_seconds, size="640x360", rate=25)
    (work / "direct").mkdir()
    direct = direct_transcode_seconds(video, work / "direct")
    proc = await asyncio.to_thread(subprocess.Popen, [sys.executable, "-c", SERVE], env=env, cwd=REPO_ROOT)
    try:
        base = f"http://127.0.0.1:{port}"
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
        assert pool is not None
        async with httpx.AsyncClient(base_url=base, headers=await signed_in(identity), timeout=120) as http:
            for _ in range(200):
                try:
                    if (await http.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
            data = video.read_bytes()
            files = {"file": ("video.mp4", data, "video/mp4")}
            started = time.monotonic()
            response = await http.post("/v1/materials", files=files)
            response.raise_for_status()
            await wait_done(pool, schema, response.json()["material_id"])
            service = time.monotonic() - started
            # direct again after the service run, so that both see the same machine load
            direct = (direct + direct_transcode_seconds(video, work / "direct")) / 2

            http.headers.update(await signed_in(identity))
            total = upload_mib * MIB
            chunk = os.urandom(CHUNK_MAX_BYTES)
            init = await http.post(
                "/v1/uploads",
                json={"upload_key": "bench", "total_bytes": total, "chunk_bytes": CHUNK_MAX_BYTES},
            )
            init.raise_for_status()
            session = init.json()
            indexes = iter(range(session["chunk_count"]))
            started = time.monotonic()

            async def sender() -> None:
                for index in indexes:
                    size = min(CHUNK_MAX_BYTES, total - index * CHUNK_MAX_BYTES)
                    put = await http.put(
                        f"/v1/uploads/{session['session_id']}/chunks/{index}", content=chunk[:size]
                    )
                    put.raise_for_status()

            await asyncio.gather(*(sender() for _ in range(UPLOAD_CONCURRENCY)))
            (await http.post(f"/v1/uploads/{session['session_id']}/complete")).raise_for_status()
            upload_seconds = time.monotonic() - started
            rss = peak_rss_mib(proc.pid)
        await pool.close()
    finally:
        proc.terminate()
        await asyncio.to_thread(proc.wait, 30)
    ratio = service / direct
    verdict = "met" if ratio <= GOAL_RATIO else "NOT met"
    print(
        f"transcode ({video_seconds} s 640x360 video): direct ffmpeg {direct:.2f} s (mean of before and "
        f"after), through the service {service:.2f} s, ratio {ratio:.2f} "
        f"(goal <= {GOAL_RATIO}: {verdict})"
    )
    print(
        f"chunked upload of {upload_mib} MiB ({session['chunk_count']} chunks, "
        f"{UPLOAD_CONCURRENCY} in flight, incl. merge): {upload_seconds:.1f} s = "
        f"{upload_mib / upload_seconds:.0f} MiB/s; "
        f"API process peak RSS {rss:.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--video-seconds", type=int, default=20)
    parser.add_argument("--upload-mib", type=int, default=1024)
    args = parser.parse_args()
    run_cleanly(run(args.video_seconds, args.upload_mib))


if __name__ == "__main__":
    main()
