"""Faults: each service is killed with SIGKILL in the middle of its flow and started again; every flow
still completes and no effect happens twice. (signal-watcher's kill is in test_watchers.py.)"""

from __future__ import annotations

import uuid
from pathlib import Path

import asyncpg
import httpx

from tests.e2e.test_media import TRANSCODE_TIMEOUT_SECONDS, material_done, upload_chunked, verify_outputs
from tests.support.e2e_fixtures import (
    FLOW_TIMEOUT_SECONDS,
    Witness,
    camera_source,
    device_body,
    eventually,
    path_names,
    settled,
)
from tests.support.e2e_flows import SenseFlow, user_client
from yovision_platform.tools.environment import LocalEnvironment

BURST_DEVICES = 20
RECOVERY_TIMEOUT_SECONDS = 120.0


async def create_burst(sense: httpx.AsyncClient, witness: Witness, label: str) -> dict[str, str]:
    """``BURST_DEVICES`` enabled devices of one new site; returns path name -> device id."""
    tenant, site = f"tenant-{label}", f"site-{uuid.uuid4().hex[:6]}"
    limit = await sense.put(f"/v1/sites/{tenant}/{site}", json={"max_video_channels": BURST_DEVICES})
    assert limit.status_code == 200, limit.text
    created: dict[str, str] = {}
    for n in range(BURST_DEVICES):
        path = f"{label}-{uuid.uuid4().hex[:8]}"
        body = device_body(tenant, site, path, camera_source(witness, f"10.9.0.{n + 1}"))
        response = await sense.post("/v1/devices", json=body)
        assert response.status_code == 201, response.text
        created[path] = response.json()["id"]
    return created


async def bell_audit_counts(
    admin_db: asyncpg.Connection, env: LocalEnvironment, device_ids: list[str]
) -> list[int]:
    schema = env.service("bell-receiver").schema
    rows = await admin_db.fetch(
        f'SELECT device_id, count(*) AS n FROM "{schema}".audit_events WHERE device_id = ANY($1) GROUP BY 1',
        device_ids,
    )
    return sorted(r["n"] for r in rows)


async def every_fact_once(admin_db: asyncpg.Connection, env: LocalEnvironment, device_ids: list[str]) -> bool:
    counts = await bell_audit_counts(admin_db, env, device_ids)
    assert all(n == 1 for n in counts), "an audit fact reached the trail twice"
    return len(counts) == len(device_ids)


async def all_configured(mediamtx: httpx.AsyncClient, paths: list[str]) -> bool:
    return set(paths) <= await path_names(mediamtx)


async def test_sense_killed_while_converging_a_burst_converges_everything_after_restart(
    sense_flow: SenseFlow,
) -> None:
    env, sense, mediamtx, witness, admin_db = sense_flow
    devices = await create_burst(sense, witness, "kill-sense")
    await env.kill("sense-reconciler")  # mid-burst: some paths added, others not, leases held
    await env.start("sense-reconciler")
    await eventually(
        lambda: all_configured(mediamtx, list(devices)),
        within=RECOVERY_TIMEOUT_SECONDS,
        what="burst converged",
    )
    await eventually(
        lambda: every_fact_once(admin_db, env, list(devices.values())), what="facts in Bell once"
    )
    await settled(env, witness)
    assert await every_fact_once(admin_db, env, list(devices.values())), "still once after settling"


async def test_bell_killed_while_facts_arrive_stores_each_fact_once(sense_flow: SenseFlow) -> None:
    env, sense, mediamtx, witness, admin_db = sense_flow
    devices = await create_burst(sense, witness, "kill-bell")
    await env.kill("bell-receiver")  # the signed pushes and the Kafka copies are in flight
    await env.start("bell-receiver")
    await eventually(
        lambda: every_fact_once(admin_db, env, list(devices.values())),
        within=RECOVERY_TIMEOUT_SECONDS,
        what="every fact in Bell exactly once",
    )
    await eventually(lambda: all_configured(mediamtx, list(devices)), what="burst converged")
    await settled(env, witness)
    assert await every_fact_once(admin_db, env, list(devices.values())), "still once after settling"


async def test_orphan_scanner_killed_while_projecting_catches_up_after_restart(
    env: LocalEnvironment,
    sense: httpx.AsyncClient,
    witness: Witness,
    admin_db: asyncpg.Connection,
) -> None:
    devices = await create_burst(sense, witness, "kill-orphan")
    await env.kill("orphan-scanner")  # the projection is consuming the burst's device events
    await env.start("orphan-scanner")
    schema = env.service("orphan-scanner").schema
    ids = [uuid.UUID(d) for d in devices.values()]

    async def projected() -> bool:
        claims = await admin_db.fetchval(
            f'SELECT count(*) FROM "{schema}".device_claims '
            "WHERE device_id = ANY($1) AND desired_state = 'enabled'",
            ids,
        )
        return bool(claims == len(ids))

    await eventually(projected, within=RECOVERY_TIMEOUT_SECONDS, what="projection caught up")


async def test_media_worker_killed_mid_transcode_finishes_the_job_after_restart(
    env: LocalEnvironment,
    witness: Witness,
    admin_db: asyncpg.Connection,
    source_video: Path,
    tmp_path: Path,
) -> None:
    async with await user_client(env, witness, "media-worker", "e2e-media-fault") as media:
        source = source_video.read_bytes()  # noqa: ASYNC240 - a small test file
        material_id = await upload_chunked(media, source, "killed mid-ffmpeg")
        await eventually(
            lambda: _ffmpeg_running(env), within=TRANSCODE_TIMEOUT_SECONDS, what="ffmpeg running"
        )
        await env.kill("media-worker")  # the whole process group, ffmpeg included, as a container kill
        await env.start("media-worker")
        view = await eventually(
            lambda: material_done(media, material_id), within=TRANSCODE_TIMEOUT_SECONDS, what="transcode done"
        )
        assert view["outputs"] == ["clip_10s", "cover", "preview_720p"]
        await verify_outputs(media, material_id, tmp_path)
    await eventually(
        lambda: _completions_in_bell(env, admin_db, material_id),
        within=FLOW_TIMEOUT_SECONDS,
        what="the completion fact in Bell",
    )
    await settled(env, witness)
    assert await _completions_in_bell(env, admin_db, material_id) == 1, "one completion, one audit fact"


async def _completions_in_bell(env: LocalEnvironment, admin_db: asyncpg.Connection, material_id: str) -> int:
    schema = env.service("bell-receiver").schema
    count: int = await admin_db.fetchval(
        f"SELECT count(*) FROM \"{schema}\".audit_events WHERE source_system = 'media' "
        "AND event_type = 'TranscodeCompleted' AND payload->>'material_id' = $1",
        material_id,
    )
    return count


async def _ffmpeg_running(env: LocalEnvironment) -> bool:
    pid = env.pid("media-worker")
    if pid is None:
        return False
    for stat in Path("/proc").glob("[0-9]*/stat"):  # noqa: ASYNC240 - procfs reads do not block
        try:
            fields = stat.read_text().rsplit(")", 1)
            name = fields[0].split("(", 1)[1]
            ppid = int(fields[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if name == "ffmpeg" and ppid == pid:
            return True
    return False
