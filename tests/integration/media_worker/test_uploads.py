"""Upload API on real PostgreSQL with a real storage folder and small injected limits."""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx

from media_worker.domain.keys import source_key
from media_worker.domain.limits import CHUNK_MIN_BYTES
from tests.support.media_uploads import (
    init,
    multipart_body,
    multipart_headers,
    upload_chunked,
    upload_plain_at_the_limit,
)
from tests.support.media_worker_fixtures import TEST_LIMITS, Media, partial_files_written, sha256_of
from tests.support.stack import problem_code


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def entries_under(root: Path) -> list[Path]:
    """Files and folders below `root` (a refused upload must leave neither)."""
    return sorted(root.rglob("*")) if root.exists() else []


async def test_plain_upload_at_the_request_limit_is_accepted_and_recorded(
    client: httpx.AsyncClient, media: Media
) -> None:
    material_id, content = await upload_plain_at_the_limit(client, media, TEST_LIMITS)
    stored = media.storage.local_path(source_key(material_id))
    assert stored.read_bytes() == content
    row = await media.fetchrow("SELECT * FROM {s}.materials WHERE id = $1", material_id)
    assert (row["status"], row["size_bytes"], row["sha256"]) == ("pending", len(content), sha256_of(stored))
    assert row["protection_until"] - row["created_at"] == timedelta(days=15)
    jobs = await media.fetch("SELECT state FROM {s}.transcode_jobs WHERE material_id = $1", material_id)
    assert [j["state"] for j in jobs] == ["pending"]
    events = await media.fetch("SELECT event_type, message_key FROM {s}.outbox")
    assert [(e["event_type"], bytes(e["message_key"])) for e in events] == [
        ("MaterialUploaded", str(material_id).encode())
    ]


async def test_plain_upload_of_the_chunked_threshold_must_be_chunked_and_leaves_no_file(
    client: httpx.AsyncClient, media: Media
) -> None:
    body = multipart_body(os.urandom(TEST_LIMITS.chunked_required_from_bytes))
    response = await client.post("/v1/materials", content=body, headers=multipart_headers(media))
    assert (response.status_code, problem_code(response)) == (413, "chunked_upload_required")
    assert entries_under(media.storage.root / "sources") == []
    assert files_under(media.storage.root) == []
    assert await media.fetch("SELECT id FROM {s}.materials") == []


async def test_chunked_upload_completes_once_even_when_complete_is_retried(
    client: httpx.AsyncClient, media: Media
) -> None:
    data = os.urandom(2500)
    session_id = await upload_chunked(client, media, data, 1000)
    first, second = await asyncio.gather(
        client.post(f"/v1/uploads/{session_id}/complete", headers=media.auth()),
        client.post(f"/v1/uploads/{session_id}/complete", headers=media.auth()),
    )
    # a retry after a lost response
    third = await client.post(f"/v1/uploads/{session_id}/complete", headers=media.auth())
    ids = {r.json().get("material_id") for r in (first, second, third) if r.status_code == 200}
    assert len(ids) == 1
    assert {first.status_code, second.status_code} <= {200, 409}
    assert third.status_code == 200
    material_id = uuid.UUID(ids.pop())
    sources = files_under(media.storage.root / "sources")
    assert sources == [media.storage.local_path(source_key(material_id))]
    assert sources[0].read_bytes() == data
    assert files_under(media.storage.root / "chunks") == []
    assert len(await media.fetch("SELECT id FROM {s}.materials")) == 1
    assert len(await media.fetch("SELECT id FROM {s}.outbox WHERE event_type = 'MaterialUploaded'")) == 1
    row = await media.fetchrow("SELECT sha256 FROM {s}.materials")
    assert row["sha256"] == hashlib.sha256(data).hexdigest()


async def test_concurrent_inits_of_one_key_create_one_session_and_resume_it(
    client: httpx.AsyncClient, media: Media
) -> None:
    responses = await asyncio.gather(*(init(client, media, 2500, 1000) for _ in range(4)))
    assert sorted(r.status_code for r in responses) == [200, 200, 200, 201]
    assert len({r.json()["session_id"] for r in responses}) == 1


async def test_merges_share_one_slot_across_instances(client: httpx.AsyncClient, media: Media) -> None:
    session_id = await upload_chunked(client, media, os.urandom(1500), 1000)
    key = f"{media.schema}:merge-slot"
    async with media.pool.acquire() as other_instance:
        assert await other_instance.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", key)
        busy = await client.post(f"/v1/uploads/{session_id}/complete", headers=media.auth())
        assert (busy.status_code, problem_code(busy), busy.headers["Retry-After"]) == (
            409,
            "merge_in_progress",
            "5",
        )
        await other_instance.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", key)
    state = await client.get(f"/v1/uploads/{session_id}", headers=media.auth())
    assert state.json()["state"] == "open"
    assert (await client.post(f"/v1/uploads/{session_id}/complete", headers=media.auth())).status_code == 200


async def test_a_failed_chunk_attempt_removes_only_its_own_partial_file(
    client: httpx.AsyncClient, media: Media
) -> None:
    session_id = (await init(client, media, 1000, 1000)).json()["session_id"]
    release = asyncio.Event()

    async def slow_body() -> AsyncIterator[bytes]:
        yield b"a" * 500
        await release.wait()
        yield b"b" * 500

    headers = {**media.auth(), "Content-Length": "1000"}
    good = asyncio.ensure_future(
        client.put(f"/v1/uploads/{session_id}/chunks/0", content=slow_body(), headers=headers)
    )
    await partial_files_written(media, 1)

    async def short_body() -> AsyncIterator[bytes]:  # no Content-Length: refused only after writing
        yield b"c" * 999

    bad = await client.put(f"/v1/uploads/{session_id}/chunks/0", content=short_body(), headers=media.auth())
    assert (bad.status_code, problem_code(bad)) == (400, "chunk_size_mismatch")
    assert len(files_under(media.storage.root / "chunks")) == 1  # the slow attempt's partial survives
    release.set()
    assert (await good).status_code == 200
    chunks = files_under(media.storage.root / "chunks")
    assert [p.read_bytes() for p in chunks] == [b"a" * 500 + b"b" * 500]


async def test_a_nul_in_an_upload_title_or_key_is_refused_before_any_work(
    client: httpx.AsyncClient, media: Media
) -> None:
    spec = {"upload_key": "k-nul", "total_bytes": 10, "chunk_bytes": CHUNK_MIN_BYTES, "title": "a\u0000b"}
    response = await client.post("/v1/uploads", json=spec, headers=media.auth())
    assert (response.status_code, problem_code(response)) == (400, "invalid_text")
    plain = await client.post(
        "/v1/materials?title=x%00", content=multipart_body(b"v"), headers=multipart_headers(media)
    )
    assert (plain.status_code, problem_code(plain)) == (400, "invalid_text")
    async with media.pool.acquire() as conn:
        assert await conn.fetchval(f'SELECT count(*) FROM "{media.schema}".upload_sessions') == 0
