"""Media: a chunked upload, the transcode, verified outputs, and the material's events in Bell's trail."""

from __future__ import annotations

import hashlib
import json
import subprocess
import uuid
from pathlib import Path

import asyncpg
import httpx

from tests.e2e.traces import TRACE_TIMEOUT_SECONDS, new_traceparent, trace_with
from tests.support.e2e_fixtures import CHUNK_BYTES, SOURCE_VIDEO_SIZE, Witness, client, eventually, user_token
from yovision_platform.tools.environment import LocalEnvironment

TRANSCODE_TIMEOUT_SECONDS = 180.0
MATERIAL_EVENTS = {"MaterialUploaded", "TranscodeStarted", "TranscodeCompleted"}


def probe(path: Path) -> dict[str, object]:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-show_streams", "-show_format", "-of", "json", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    document: dict[str, object] = json.loads(out)
    return document


async def upload_chunked(
    media: httpx.AsyncClient, source: bytes, title: str, *, traceparent: str | None = None
) -> str:
    """The material of a chunked upload of `source`; its first request continues `traceparent`."""
    init = await media.post(
        "/v1/uploads",
        headers={"traceparent": traceparent} if traceparent else {},
        json={
            "upload_key": f"e2e-{uuid.uuid4().hex}",
            "total_bytes": len(source),
            "chunk_bytes": CHUNK_BYTES,
            "title": title,
            "content_type": "video/mp4",
        },
    )
    assert init.status_code == 201, init.text
    session = init.json()
    for index in range(session["chunk_count"]):
        chunk = source[index * CHUNK_BYTES : (index + 1) * CHUNK_BYTES]
        put = await media.put(
            f"/v1/uploads/{session['session_id']}/chunks/{index}",
            content=chunk,
            headers={"X-Chunk-Sha256": hashlib.sha256(chunk).hexdigest()},
        )
        assert put.status_code == 200, put.text
    done = await media.post(f"/v1/uploads/{session['session_id']}/complete")
    assert done.status_code == 200, done.text
    material_id: str = done.json()["material_id"]
    again = await media.post(f"/v1/uploads/{session['session_id']}/complete")
    assert (again.status_code, again.json()["material_id"]) == (200, material_id), "complete is idempotent"
    return material_id


async def material_done(media: httpx.AsyncClient, material_id: str) -> dict[str, object] | None:
    view: dict[str, object] = (await media.get(f"/v1/materials/{material_id}")).json()
    assert view["status"] != "failed", view
    return view if view["status"] == "done" else None


async def media_events(admin_db: asyncpg.Connection, env: LocalEnvironment, material_id: str) -> list[str]:
    schema = env.service("bell-receiver").schema
    rows = await admin_db.fetch(
        f'SELECT event_type FROM "{schema}".audit_events '
        "WHERE source_system = 'media' AND payload->>'material_id' = $1 ORDER BY id",
        material_id,
    )
    return [r["event_type"] for r in rows]


async def verify_outputs(media: httpx.AsyncClient, material_id: str, folder: Path) -> None:
    for kind in ("cover", "preview_720p", "clip_10s"):
        response = await media.get(f"/v1/materials/{material_id}/outputs/{kind}")
        assert response.status_code == 200, kind
        (folder / kind).write_bytes(response.content)
    cover = probe(folder / "cover")["streams"]
    assert isinstance(cover, list) and (cover[0]["width"], cover[0]["height"]) == SOURCE_VIDEO_SIZE
    preview = probe(folder / "preview_720p")
    preview_streams = preview["streams"]
    assert isinstance(preview_streams, list)
    video = next(s for s in preview_streams if s["codec_type"] == "video")
    assert video["height"] == 720
    clip_format = probe(folder / "clip_10s")["format"]
    assert isinstance(clip_format, dict) and abs(float(clip_format["duration"]) - 10.0) <= 0.5


async def test_a_chunked_upload_is_transcoded_and_audited(
    env: LocalEnvironment,
    witness: Witness,
    admin_db: asyncpg.Connection,
    source_video: Path,
    tmp_path: Path,
) -> None:
    token = await user_token(env, "media-worker", "e2e-media-user")
    witness.secrets.add(token)
    source = source_video.read_bytes()  # noqa: ASYNC240 - a small test file
    trace_id, traceparent = new_traceparent()
    async with client(env.url("media-worker"), witness, {"Authorization": f"Bearer {token}"}) as media:
        material_id = await upload_chunked(media, source, "e2e clip", traceparent=traceparent)
        view = await eventually(
            lambda: material_done(media, material_id), within=TRANSCODE_TIMEOUT_SECONDS, what="transcode done"
        )
        assert view["outputs"] == ["clip_10s", "cover", "preview_720p"]
        assert view["source_key"] is None, "the source location stays hidden during the protection window"
        assert view["size_bytes"] == len(source)
        await verify_outputs(media, material_id, tmp_path)
    events = await eventually(
        lambda: _all_events(admin_db, env, material_id),
        within=TRANSCODE_TIMEOUT_SECONDS,
        what="events in Bell",
    )
    assert [e for e in events if e in MATERIAL_EVENTS] == [
        "MaterialUploaded",
        "TranscodeStarted",
        "TranscodeCompleted",
    ]
    # One trace from the upload's first request through every chunk, the merge and the transcode to Bell.
    wanted = {"media-worker": {"POST /v1/uploads", "upload chunk", "upload complete", "transcode"}}
    found = await eventually(
        lambda: trace_with(env, trace_id, wanted), within=TRACE_TIMEOUT_SECONDS, what="the upload's trace"
    )
    chunks = [s for s in found["media-worker"] if s["operationName"] == "upload chunk"]
    assert len(chunks) == -(-len(source) // CHUNK_BYTES), "every chunk in the upload's trace"
    await eventually(
        lambda: _traced_events(admin_db, env, material_id, trace_id), what="the events' trace ids in Bell"
    )


async def _traced_events(
    admin_db: asyncpg.Connection, env: LocalEnvironment, material_id: str, trace_id: str
) -> set[str] | None:
    schema = env.service("bell-receiver").schema
    rows = await admin_db.fetch(
        f'SELECT event_type FROM "{schema}".audit_events '
        "WHERE source_system = 'media' AND payload->>'material_id' = $1 AND trace_id = $2",
        material_id,
        trace_id,
    )
    found = {r["event_type"] for r in rows}
    return found if found >= MATERIAL_EVENTS else None


async def _all_events(
    admin_db: asyncpg.Connection, env: LocalEnvironment, material_id: str
) -> list[str] | None:
    events = await media_events(admin_db, env, material_id)
    return events if set(events) >= MATERIAL_EVENTS else None
