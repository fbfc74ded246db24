"""Upload use cases and their routes on the fakes: every limit at its boundary, resumable chunked sessions,
one merge at a time, a source never lost, refusals with their status, code and Retry-After."""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest

from media_worker.domain.errors import (
    InsufficientStorage,
    LengthRequired,
    MediaRefusal,
    MergeInProgress,
    UploadConflict,
)
from media_worker.domain.keys import source_key
from media_worker.domain.material import MaterialStatus
from media_worker.domain.sessions import SessionState
from media_worker.service_layer.uploads import MERGE_STALE_SECONDS
from tests.support.media_uploads import (
    init,
    multipart_body,
    multipart_headers,
    upload_chunked,
    upload_plain_at_the_limit,
)
from tests.support.stack import problem_code
from tests.unit.media_worker.conftest import OWNER, TEST_LIMITS, Fakes, body_of


def stored_sources(fakes: Fakes) -> list[str]:
    return sorted(key for key in fakes.storage.files if key.startswith("sources/"))


def stored_chunks(fakes: Fakes) -> list[str]:
    return sorted(key for key in fakes.storage.files if key.startswith("chunks/"))


async def claimable(fakes: Fakes) -> uuid.UUID | None:
    async with fakes.uow() as uow:
        claimed = await uow.jobs.claim("probe", 60.0)
    return claimed.material_id if claimed else None


# --- plain uploads --------------------------------------------------------------------------------------


async def test_a_plain_upload_at_the_request_limit_is_recorded_with_its_job_and_event(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    material_id, content = await upload_plain_at_the_limit(client, fakes, TEST_LIMITS)
    assert fakes.source(material_id) == content
    material = await fakes.material(material_id)
    assert (material.status, material.size_bytes, material.sha256, material.title) == (
        MaterialStatus.PENDING,
        len(content),
        hashlib.sha256(content).hexdigest(),
        "clip",
    )
    assert material.protection_until - material.created_at == timedelta(days=15)
    assert await claimable(fakes) == material_id
    assert fakes.events() == ["MaterialUploaded"]
    (uploaded,) = fakes.event_payloads("MaterialUploaded")
    assert (uploaded["upload_mode"], uploaded["size_bytes"], uploaded["uploaded_by"]) == (
        "multipart",
        2047,
        OWNER,
    )
    assert fakes.woken == ["job"]


async def test_a_plain_upload_one_byte_over_the_request_limit_is_refused_before_it_is_read(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    async def must_not_be_read() -> AsyncIterator[bytes]:
        raise AssertionError("the body was read")
        yield b""  # pragma: no cover

    headers = {**multipart_headers(fakes), "Content-Length": str(TEST_LIMITS.plain_upload_max_bytes + 1)}
    response = await client.post("/v1/materials", content=must_not_be_read(), headers=headers)
    assert (response.status_code, problem_code(response)) == (413, "request_too_large")
    assert fakes.storage.files == {}


@pytest.mark.parametrize("length", [None, "", "12a", "-1"])
async def test_a_plain_upload_without_a_valid_declared_length_is_refused(
    fakes: Fakes, length: str | None
) -> None:
    with pytest.raises(LengthRequired):
        await fakes.use_cases.uploads.upload_plain(OWNER, "t", None, body_of(b"v"), request_length=length)


@pytest.mark.parametrize(
    ("size", "status"),
    [(TEST_LIMITS.chunked_required_from_bytes - 1, 201), (TEST_LIMITS.chunked_required_from_bytes, 413)],
)
async def test_a_plain_source_must_stay_below_the_chunked_threshold(
    client: httpx.AsyncClient, fakes: Fakes, size: int, status: int
) -> None:
    response = await client.post(
        "/v1/materials", content=multipart_body(os.urandom(size)), headers=multipart_headers(fakes)
    )
    assert response.status_code == status
    if status == 413:
        assert problem_code(response) == "chunked_upload_required"
        assert fakes.storage.files == {} and fakes.events() == []


@pytest.mark.parametrize(
    "body",
    [
        multipart_body(b""),  # an empty file
        b'--b\r\nContent-Disposition: form-data; name="title"\r\n\r\nx\r\n--b--\r\n',  # no file part
        b"not multipart at all",
    ],
)
async def test_a_multipart_body_without_one_non_empty_file_is_refused(
    client: httpx.AsyncClient, fakes: Fakes, body: bytes
) -> None:
    headers = multipart_headers(fakes)
    if b"--b\r\n" in body:
        headers["Content-Type"] = "multipart/form-data; boundary=b"
    response = await client.post("/v1/materials", content=body, headers=headers)
    assert (response.status_code, problem_code(response)) == (400, "invalid_multipart")
    assert fakes.storage.files == {}


async def test_a_failed_recording_keeps_the_stored_source_and_records_nothing(fakes: Fakes) -> None:
    class BrokenEvents:
        async def emit(self, *_: object) -> None:
            raise RuntimeError("outbox down")

    fakes.use_cases.uploads._events = BrokenEvents()  # type: ignore[assignment]
    with pytest.raises(RuntimeError):
        await fakes.use_cases.uploads.upload_plain(
            OWNER, "t", None, body_of(b"source bytes"), request_length="12"
        )
    (source,) = stored_sources(fakes)
    assert fakes.storage.files[source] == b"source bytes"
    async with fakes.uow() as uow:
        assert await uow.listing.materials(OWNER, 10, None) == []
    assert await claimable(fakes) is None and fakes.events() == []


# --- chunked uploads ------------------------------------------------------------------------------------


async def test_a_chunked_upload_completes_once_however_often_complete_is_called(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    data = os.urandom(2500)
    session_id = await upload_chunked(client, fakes, data, 1000)
    url = f"/v1/uploads/{session_id}/complete"
    answers = await asyncio.gather(*(client.post(url, headers=fakes.auth()) for _ in range(2)))
    answers.append(await client.post(url, headers=fakes.auth()))  # the retry of a lost answer
    assert [r.status_code for r in answers] in ([200, 409, 200], [409, 200, 200], [200, 200, 200])
    ids = {r.json()["material_id"] for r in answers if r.status_code == 200}
    assert len(ids) == 1
    material_id = uuid.UUID(ids.pop())
    assert stored_sources(fakes) == [source_key(material_id)] and fakes.source(material_id) == data
    assert stored_chunks(fakes) == []
    material = await fakes.material(material_id)
    assert (material.sha256, material.upload_mode.value, material.title) == (
        hashlib.sha256(data).hexdigest(),
        "chunked",
        "t",
    )
    assert fakes.events() == ["MaterialUploaded"]
    state = (await client.get(f"/v1/uploads/{session_id}", headers=fakes.auth())).json()
    assert (state["state"], state["material_id"], state["missing"]) == ("completed", str(material_id), [])


async def test_complete_before_every_chunk_arrived_is_refused(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    session_id = (await init(client, fakes, 2500, 1000)).json()["session_id"]
    await client.put(f"/v1/uploads/{session_id}/chunks/0", content=b"a" * 1000, headers=fakes.auth())
    done = await client.post(f"/v1/uploads/{session_id}/complete", headers=fakes.auth())
    assert (done.status_code, problem_code(done)) == (409, "upload_incomplete")
    state = (await client.get(f"/v1/uploads/{session_id}", headers=fakes.auth())).json()
    assert (state["received"], state["missing"], state["material_id"]) == ([0], [1, 2], None)


@pytest.mark.parametrize(("index", "size"), [(0, 999), (0, 1001), (2, 499), (2, 501)])
async def test_a_chunk_of_another_size_than_its_layout_is_refused_and_leaves_nothing(
    client: httpx.AsyncClient, fakes: Fakes, index: int, size: int
) -> None:
    session_id = (await init(client, fakes, 2500, 1000)).json()["session_id"]
    put = await client.put(
        f"/v1/uploads/{session_id}/chunks/{index}", content=b"a" * size, headers=fakes.auth()
    )
    assert (put.status_code, problem_code(put)) == (400, "chunk_size_mismatch")
    assert stored_chunks(fakes) == []


@pytest.mark.parametrize(
    ("declared", "code"), [(TEST_LIMITS.chunk_max_bytes + 1, "chunk_too_large"), (999, "chunk_size_mismatch")]
)
async def test_a_declared_chunk_length_is_checked_before_the_body(
    fakes: Fakes, declared: int, code: str
) -> None:
    session = (await fakes.use_cases.uploads.init(OWNER, "k", 2500, 1000, "t", None)).session

    async def must_not_be_read() -> AsyncIterator[bytes]:
        raise AssertionError("the body was read")
        yield b""  # pragma: no cover

    with pytest.raises(MediaRefusal) as refused:
        await fakes.use_cases.uploads.put_chunk(
            OWNER, session.session_id, 0, declared, must_not_be_read(), None
        )
    assert refused.value.code == code


@pytest.mark.parametrize("index", [-1, 3])
async def test_a_chunk_index_outside_the_layout_is_refused(
    client: httpx.AsyncClient, fakes: Fakes, index: int
) -> None:
    session_id = (await init(client, fakes, 2500, 1000)).json()["session_id"]
    put = await client.put(
        f"/v1/uploads/{session_id}/chunks/{index}", content=b"a" * 500, headers=fakes.auth()
    )
    assert (put.status_code, problem_code(put)) == (400, "chunk_index_out_of_range")


async def test_a_chunk_with_a_wrong_checksum_is_refused(client: httpx.AsyncClient, fakes: Fakes) -> None:
    session_id = (await init(client, fakes, 1000, 1000)).json()["session_id"]
    headers = {**fakes.auth(), "X-Chunk-Sha256": hashlib.sha256(b"other").hexdigest()}
    put = await client.put(f"/v1/uploads/{session_id}/chunks/0", content=b"a" * 1000, headers=headers)
    assert (put.status_code, problem_code(put)) == (400, "chunk_checksum_mismatch")
    assert stored_chunks(fakes) == []
    headers["X-Chunk-Sha256"] = hashlib.sha256(b"a" * 1000).hexdigest()
    assert (
        await client.put(f"/v1/uploads/{session_id}/chunks/0", content=b"a" * 1000, headers=headers)
    ).status_code == 200


async def test_a_chunk_that_already_landed_is_not_written_again(fakes: Fakes) -> None:
    session = (await fakes.use_cases.uploads.init(OWNER, "k", 1000, 1000, "t", None)).session
    await fakes.use_cases.uploads.put_chunk(OWNER, session.session_id, 0, 1000, body_of(b"a" * 1000), None)

    async def must_not_be_read() -> AsyncIterator[bytes]:
        raise AssertionError("the body was read")
        yield b""  # pragma: no cover

    again = await fakes.use_cases.uploads.put_chunk(
        OWNER, session.session_id, 0, 1000, must_not_be_read(), None
    )
    assert again.received == frozenset({0})


async def test_no_chunk_is_taken_once_the_session_merges_or_completed(fakes: Fakes) -> None:
    session = (await fakes.use_cases.uploads.init(OWNER, "k", 2000, 1000, "t", None)).session
    await fakes.use_cases.uploads.put_chunk(OWNER, session.session_id, 0, 1000, body_of(b"a" * 1000), None)
    await fakes.use_cases.uploads.put_chunk(OWNER, session.session_id, 1, 1000, body_of(b"b" * 1000), None)
    await fakes.use_cases.uploads.complete(OWNER, session.session_id)
    with pytest.raises(UploadConflict) as refused:
        await fakes.use_cases.uploads.put_chunk(
            OWNER, session.session_id, 1, 1000, body_of(b"c" * 1000), None
        )
    assert refused.value.code == "upload_not_open"


@pytest.mark.parametrize(
    ("total", "chunk", "status", "code"),
    [
        (TEST_LIMITS.source_max_bytes, TEST_LIMITS.chunk_max_bytes, 201, None),
        (TEST_LIMITS.source_max_bytes + 1, TEST_LIMITS.chunk_max_bytes, 422, "source_too_large"),
        (TEST_LIMITS.source_max_bytes, TEST_LIMITS.chunk_max_bytes + 1, 422, "chunk_bytes_too_large"),
        (TEST_LIMITS.chunk_min_bytes - 1, TEST_LIMITS.chunk_min_bytes, 201, None),
        (TEST_LIMITS.chunk_min_bytes, TEST_LIMITS.chunk_min_bytes, 201, None),
        (TEST_LIMITS.chunk_min_bytes + 1, TEST_LIMITS.chunk_min_bytes, 201, None),
        (1, TEST_LIMITS.chunk_min_bytes - 1, 422, "chunk_bytes_too_small"),
        (TEST_LIMITS.chunk_count_max * 1000, 1000, 201, None),
        (TEST_LIMITS.chunk_count_max * 1000 + 1, 1000, 422, "too_many_chunks"),
    ],
)
async def test_init_limits(
    client: httpx.AsyncClient, fakes: Fakes, total: int, chunk: int, status: int, code: str | None
) -> None:
    response = await init(client, fakes, total, chunk)
    assert response.status_code == status
    if code is not None:
        assert problem_code(response) == code


async def test_a_resumed_init_answers_200_with_the_same_session_and_a_new_key_201(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    first = await init(client, fakes, 2500, 1000)
    resumed = await init(client, fakes, 2500, 1000)
    other = await init(client, fakes, 2500, 1000, key="k2")
    assert [first.status_code, resumed.status_code, other.status_code] == [201, 200, 201]
    assert resumed.json() == first.json()
    assert other.json()["session_id"] != first.json()["session_id"]
    assert first.json()["chunk_count"] == 3 and first.json()["missing"] == [0, 1, 2]


async def test_a_layout_change_on_resume_is_refused(client: httpx.AsyncClient, fakes: Fakes) -> None:
    await init(client, fakes, 2500, 1000)
    changed = await init(client, fakes, 2500, 500)
    assert (changed.status_code, problem_code(changed)) == (409, "layout_conflict")


@pytest.mark.parametrize(
    ("free", "code"), [(None, "free_space_unknown"), (2 * 2500 + 1000 - 1, "insufficient_storage")]
)
async def test_init_needs_room_for_the_chunks_the_merged_file_and_the_margin(
    client: httpx.AsyncClient, fakes: Fakes, free: int | None, code: str
) -> None:
    fakes.storage.free = free
    response = await init(client, fakes, 2500, 1000)
    assert (response.status_code, problem_code(response)) == (507, code)
    fakes.storage.free = 2 * 2500 + 1000
    assert (await init(client, fakes, 2500, 1000)).status_code == 201


async def test_the_merge_rechecks_free_space_and_can_be_retried(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    session_id = await upload_chunked(client, fakes, os.urandom(2500), 1000)
    fakes.storage.free = 2500 + 1000 - 1
    refused = await client.post(f"/v1/uploads/{session_id}/complete", headers=fakes.auth())
    assert (refused.status_code, problem_code(refused)) == (507, "insufficient_storage")
    assert stored_sources(fakes) == [] and fakes.events() == []
    assert (await client.get(f"/v1/uploads/{session_id}", headers=fakes.auth())).json()["state"] == "open"
    fakes.storage.free = 2500 + 1000
    assert (await client.post(f"/v1/uploads/{session_id}/complete", headers=fakes.auth())).status_code == 200


async def test_chunk_writes_beyond_the_slots_wait_then_get_429_with_retry_after(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    session_id = (await init(client, fakes, 3000, 1000)).json()["session_id"]
    release, writing = asyncio.Event(), asyncio.Semaphore(0)

    async def slow_body() -> AsyncIterator[bytes]:
        writing.release()
        yield b"a" * 500
        await release.wait()
        yield b"a" * 500

    def put(index: int, body: object) -> asyncio.Task[httpx.Response]:
        headers = {**fakes.auth(), "Content-Length": "1000"}
        return asyncio.ensure_future(
            client.put(f"/v1/uploads/{session_id}/chunks/{index}", content=body, headers=headers)  # type: ignore[arg-type]
        )

    holders = [put(0, slow_body()), put(1, slow_body())]
    for _ in holders:
        await writing.acquire()  # both holders have a slot and are writing
    refused = await put(2, b"a" * 1000)
    assert (refused.status_code, problem_code(refused), refused.headers["Retry-After"]) == (
        429,
        "chunk_slots_busy",
        "2",
    )
    assert refused.json()["retry_after"] == 2
    release.set()
    assert [(await h).status_code for h in holders] == [200, 200]
    assert (await put(2, b"a" * 1000)).status_code == 200
    assert fakes.activity.uploads == 0


async def test_a_merge_slot_held_by_another_instance_answers_409_with_retry_after(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    session_id = await upload_chunked(client, fakes, os.urandom(1500), 1000)
    async with fakes.locks.merge_slot() as other_instance:
        assert other_instance
        busy = await client.post(f"/v1/uploads/{session_id}/complete", headers=fakes.auth())
    assert (busy.status_code, problem_code(busy), busy.headers["Retry-After"]) == (
        409,
        "merge_in_progress",
        "5",
    )
    assert (await client.get(f"/v1/uploads/{session_id}", headers=fakes.auth())).json()["state"] == "open"
    assert (await client.post(f"/v1/uploads/{session_id}/complete", headers=fakes.auth())).status_code == 200


async def test_a_merge_abandoned_by_a_dead_instance_is_taken_over_once_stale(fakes: Fakes) -> None:
    session = (await fakes.use_cases.uploads.init(OWNER, "k", 1000, 1000, "t", None)).session
    await fakes.use_cases.uploads.put_chunk(OWNER, session.session_id, 0, 1000, body_of(b"a" * 1000), None)
    async with fakes.uow() as uow:  # a dead instance began merging it
        assert await uow.sessions.begin_merge(session.session_id, OWNER, "media-dead", MERGE_STALE_SECONDS)
    with pytest.raises(MergeInProgress):
        await fakes.use_cases.uploads.complete(OWNER, session.session_id)
    fakes.clock.advance(MERGE_STALE_SECONDS + 1)
    assert await fakes.use_cases.uploads.complete(OWNER, session.session_id) == session.material_id
    assert (await fakes.use_cases.uploads.session(OWNER, session.session_id)).state == SessionState.COMPLETED


async def test_a_failed_merge_reopens_the_session(fakes: Fakes) -> None:
    session = (await fakes.use_cases.uploads.init(OWNER, "k", 1000, 1000, "t", None)).session
    await fakes.use_cases.uploads.put_chunk(OWNER, session.session_id, 0, 1000, body_of(b"a" * 1000), None)
    fakes.storage.free = None
    with pytest.raises(InsufficientStorage):
        await fakes.use_cases.uploads.complete(OWNER, session.session_id)
    assert (await fakes.use_cases.uploads.session(OWNER, session.session_id)).state == SessionState.OPEN
    assert fakes.activity.merges == 0


async def test_upload_sessions_are_private_to_their_owner(client: httpx.AsyncClient, fakes: Fakes) -> None:
    session_id = (await init(client, fakes, 1000, 1000)).json()["session_id"]
    for response in (
        await client.get(f"/v1/uploads/{session_id}", headers=fakes.auth("user-2")),
        await client.put(
            f"/v1/uploads/{session_id}/chunks/0", content=b"a" * 1000, headers=fakes.auth("user-2")
        ),
        await client.post(f"/v1/uploads/{session_id}/complete", headers=fakes.auth("user-2")),
        await client.get(f"/v1/uploads/{uuid.uuid4()}", headers=fakes.auth()),
    ):
        assert (response.status_code, problem_code(response)) == (404, "not_found")
    assert stored_chunks(fakes) == []


async def test_refusals_are_counted_by_code(client: httpx.AsyncClient, fakes: Fakes) -> None:
    for _ in range(2):
        await init(client, fakes, TEST_LIMITS.source_max_bytes + 1, 1000)
    assert fakes.registry.get_sample_value("media_api_refusals_total", {"code": "source_too_large"}) == 2
    assert (await client.get("/v1/uploads/nope", headers=fakes.auth())).status_code == 422  # the framework's
    assert fakes.registry.get_sample_value("media_api_refusals_total", {"code": "not_found"}) is None
    assert (await client.get(f"/v1/uploads/{uuid.uuid4()}", headers=fakes.auth())).status_code == 404
    assert fakes.registry.get_sample_value("media_api_refusals_total", {"code": "not_found"}) == 1
