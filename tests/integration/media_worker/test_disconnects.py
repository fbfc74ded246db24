"""Clients that stall and then go away, on real sockets against the app under uvicorn: every aborted body
read releases its chunk slot and removes its partial file at once, is counted, and is logged at info
without a traceback."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import asyncpg
import httpx
import pytest
from prometheus_client import CollectorRegistry

from media_worker.domain.limits import MAX_CONCURRENT_CHUNK_WRITES
from media_worker.service_layer.metrics import MediaMetrics
from tests.support.media_uploads import BOUNDARY, init, multipart_body
from tests.support.media_worker_fixtures import TEST_LIMITS, Media, build_app, build_media
from tests.support.served_app import serve_app
from tests.support.stack import MigratedSchema, problem_code

CHUNK_BYTES = 512
STALLED_BYTES = 100
WAIT_SECONDS = 10.0


@pytest.fixture
def media(pool: asyncpg.Pool, media_schema: MigratedSchema, tmp_path: Path) -> Media:
    """The SPEC's 8 chunk slots (the other test limits stay small)."""
    limits = replace(TEST_LIMITS, max_concurrent_chunk_writes=MAX_CONCURRENT_CHUNK_WRITES)
    return build_media(pool, media_schema.name, tmp_path, limits)


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
async def served(media: Media, registry: CollectorRegistry) -> AsyncIterator[int]:
    app = build_app(media, MediaMetrics(registry, media.activity))
    async with serve_app(app) as port:
        yield port


async def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def partial_files(media: Media) -> list[Path]:
    return sorted(media.storage.root.rglob("*.partial"))


async def stalled_request(port: int, head: str, sent: bytes) -> asyncio.StreamWriter:
    """Send the request head and the first bytes of a longer declared body, then stall."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head.encode() + sent)
    await writer.drain()
    return writer


async def test_stalled_then_disconnected_chunk_uploads_free_every_slot_and_partial_file(
    media: Media, served: int, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    slots = MAX_CONCURRENT_CHUNK_WRITES
    session_id = (await _http_init(served, media, (slots + 1) * CHUNK_BYTES)).json()["session_id"]
    token = media.auth()["Authorization"]
    stalled = [
        await stalled_request(
            served,
            f"PUT /v1/uploads/{session_id}/chunks/{index} HTTP/1.1\r\nHost: media\r\n"
            f"Authorization: {token}\r\nContent-Length: {CHUNK_BYTES}\r\n\r\n",
            b"s" * STALLED_BYTES,
        )
        for index in range(slots)
    ]
    await wait_until(lambda: len(partial_files(media)) == slots)  # every slot is held
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{served}") as http:
        url = f"/v1/uploads/{session_id}/chunks/{slots}"
        busy = await http.put(url, content=b"n" * CHUNK_BYTES, headers=media.auth())
        assert (busy.status_code, problem_code(busy)) == (429, "chunk_slots_busy")
        for writer in stalled:
            writer.close()
        await wait_until(lambda: media.activity.uploads == 0)
        assert partial_files(media) == []
        put = await http.put(url, content=b"n" * CHUNK_BYTES, headers=media.auth())
        assert put.status_code == 200, put.text
        assert put.json()["received"] == [slots]
    assert registry.get_sample_value("media_client_disconnects_total", {"upload": "chunk"}) == slots
    disconnects = [r for r in caplog.records if r.getMessage().startswith("client disconnected")]
    assert len(disconnects) == slots
    assert all(r.levelno == logging.INFO and r.exc_info is None for r in disconnects)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_a_plain_upload_whose_client_goes_away_leaves_no_file_or_folder(
    media: Media, served: int, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    body = multipart_body(b"p" * 1000)
    writer = await stalled_request(
        served,
        f"POST /v1/materials HTTP/1.1\r\nHost: media\r\nAuthorization: {media.auth()['Authorization']}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {len(body)}\r\n\r\n",
        body[:500],
    )
    await wait_until(lambda: len(partial_files(media)) == 1)
    writer.close()
    await wait_until(lambda: media.activity.uploads == 0)
    assert sorted(media.storage.root.rglob("*")) in ([], [media.storage.root / "sources"])
    assert await media.fetch("SELECT id FROM {s}.materials") == []
    assert registry.get_sample_value("media_client_disconnects_total", {"upload": "plain"}) == 1
    assert registry.get_sample_value("media_api_refusals_total", {"code": "invalid_multipart"}) is None
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


async def _http_init(port: int, media: Media, total: int) -> httpx.Response:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        response = await init(http, media, total, CHUNK_BYTES)
    assert response.status_code == 201, response.text
    return response


class BodyReadDeadline(Exception):
    """Stands for whatever a body read deadline raises into the request's body stream."""


@pytest.mark.parametrize("ending", ["error", "deadline", "cancelled"])
async def test_any_failed_body_read_releases_its_slot_and_partial_file_at_once(
    media: Media, ending: str
) -> None:
    slots = MAX_CONCURRENT_CHUNK_WRITES
    session = (
        await media.use_cases.uploads.init("user-1", "k", (slots + 1) * CHUNK_BYTES, CHUNK_BYTES, "t", None)
    ).session
    stalled = asyncio.Event()

    async def failing_body() -> AsyncIterator[bytes]:
        yield b"s" * STALLED_BYTES
        stalled.set()
        if ending == "error":
            raise OSError("connection reset")
        if ending == "deadline":
            raise BodyReadDeadline()
        await asyncio.Event().wait()  # stalls until cancelled
        yield b""  # pragma: no cover

    for index in range(slots):  # as many failures as there are slots: one leak would show
        stalled.clear()
        attempt = asyncio.ensure_future(
            media.use_cases.uploads.put_chunk("user-1", session.session_id, index, None, failing_body(), None)
        )
        await stalled.wait()
        if ending == "cancelled":
            attempt.cancel()
        with pytest.raises((OSError, BodyReadDeadline, asyncio.CancelledError)):
            await attempt
        assert partial_files(media) == [] and media.activity.uploads == 0

    async def whole_chunk() -> AsyncIterator[bytes]:
        yield b"n" * CHUNK_BYTES

    stored = await media.use_cases.uploads.put_chunk(
        "user-1", session.session_id, slots, None, whole_chunk(), None
    )
    assert stored.received == frozenset({slots})
