"""The drain protocol over the routes on the fakes: it stops new work, and reports safe-to-stop only for its
own idle instance."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx

from media_worker.adapters.memory import MemoryMediaUnitOfWork
from media_worker.entrypoints.transcode_worker import TranscodeWorker
from tests.support.media_uploads import multipart_body, multipart_headers
from tests.support.stack import problem_code
from tests.unit.media_worker.conftest import INSTANCE, OWNER, Fakes, wait_until


async def test_drain_needs_the_drain_permission(client: httpx.AsyncClient, fakes: Fakes) -> None:
    for method in ("GET", "POST"):
        forbidden = await client.request(method, "/internal/drain", headers=fakes.auth())
        assert (forbidden.status_code, problem_code(forbidden)) == (403, "forbidden")
        assert (await client.request(method, "/internal/drain")).status_code == 401
    assert (await client.get("/internal/instances", headers=fakes.auth())).status_code == 403
    assert fakes.activity.draining is False


async def test_drain_stops_new_uploads_and_is_safe_only_when_idle(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    await fakes.use_cases.drain.register()
    before = (await client.get("/internal/drain", headers=fakes.operator)).json()
    assert (before["safe_to_stop"], before["reason"], before["capability_instance_id"]) == (
        False,
        "not_draining",
        INSTANCE,
    )
    drained = (await client.post("/internal/drain", headers=fakes.operator)).json()
    assert drained == {
        "instance_id": INSTANCE,
        "capability_instance_id": INSTANCE,
        "draining": True,
        "active_jobs": 0,
        "active_uploads": 0,
        "active_merges": 0,
        "safe_to_stop": True,
        "reason": "safe",
    }
    refused = await client.post(
        "/v1/materials", content=multipart_body(b"v"), headers=multipart_headers(fakes)
    )
    assert (refused.status_code, problem_code(refused), refused.headers["Retry-After"]) == (
        503,
        "draining",
        "30",
    )
    init = await client.post(
        "/v1/uploads", json={"upload_key": "k", "total_bytes": 10, "chunk_bytes": 10}, headers=fakes.auth()
    )
    assert (init.status_code, problem_code(init)) == (503, "draining")
    listed = (await client.get("/internal/instances", headers=fakes.operator)).json()["items"]
    assert [(i["instance_id"], i["draining"], i["this_instance"], i["leased_jobs"]) for i in listed] == [
        (INSTANCE, True, True, 0)
    ]


async def test_an_active_upload_is_not_safe_to_stop_and_no_new_chunk_starts(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    await fakes.use_cases.drain.register()
    session = (await fakes.use_cases.uploads.init(OWNER, "k", 2000, 1000, "t", None)).session
    release = asyncio.Event()

    async def slow_body() -> AsyncIterator[bytes]:
        yield b"a" * 500
        await release.wait()
        yield b"a" * 500

    put = asyncio.ensure_future(
        fakes.use_cases.uploads.put_chunk(OWNER, session.session_id, 0, 1000, slow_body(), None)
    )
    await wait_until(lambda: fakes.activity.uploads == 1)
    busy = (await client.post("/internal/drain", headers=fakes.operator)).json()
    assert (busy["active_uploads"], busy["safe_to_stop"], busy["reason"]) == (1, False, "work_active")
    refused = await client.put(
        f"/v1/uploads/{session.session_id}/chunks/1", content=b"b" * 1000, headers=fakes.auth()
    )
    assert (refused.status_code, problem_code(refused)) == (503, "draining")
    release.set()
    assert (await put).received == frozenset({0})
    assert (await client.get("/internal/drain", headers=fakes.operator)).json()["safe_to_stop"] is True


async def test_an_active_job_is_not_safe_to_stop_until_it_ends(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    await fakes.use_cases.drain.register()
    await fakes.upload()
    fakes.tools.hold = asyncio.Event()
    job = asyncio.ensure_future(fakes.worker().run_once())
    await wait_until(fakes.tools.rendering.is_set)
    busy = (await client.post("/internal/drain", headers=fakes.operator)).json()
    assert (busy["active_jobs"], busy["safe_to_stop"], busy["reason"]) == (1, False, "work_active")
    listed = (await client.get("/internal/instances", headers=fakes.operator)).json()["items"]
    assert [i["leased_jobs"] for i in listed] == [1]
    fakes.tools.hold.set()  # a draining instance finishes what it runs
    assert await job is True
    idle = (await client.get("/internal/drain", headers=fakes.operator)).json()
    assert (idle["active_jobs"], idle["safe_to_stop"]) == (0, True)


async def test_a_draining_worker_takes_no_new_job(fakes: Fakes) -> None:
    await fakes.upload()
    fakes.activity.draining = True
    opened: list[MemoryMediaUnitOfWork] = []

    def counted() -> MemoryMediaUnitOfWork:
        opened.append(fakes.db.unit_of_work())
        return opened[-1]

    worker = fakes.worker(rescan_seconds=0.01)
    worker.uow = counted
    stop = asyncio.Event()
    runner = asyncio.ensure_future(TranscodeWorker(worker).run(stop))
    await wait_until(
        lambda: len(opened) >= 4
    )  # two rounds: recovery's lease query, then the next-round query
    stop.set()
    await asyncio.wait_for(runner, 5)
    assert fakes.tools.renders == []
    async with fakes.uow() as uow:
        assert await uow.jobs.claim("probe", 60.0) is not None  # still pending, never claimed


async def test_a_capability_of_another_instance_or_none_is_not_accepted(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    report = (await client.post("/internal/drain", headers=fakes.operator)).json()
    assert (report["safe_to_stop"], report["reason"], report["capability_instance_id"]) == (
        False,
        "capability_unknown",
        None,
    )
    fakes.capability.publish("media-test-other")
    report = (await client.get("/internal/drain", headers=fakes.operator)).json()
    assert (report["safe_to_stop"], report["reason"]) == (False, "capability_mismatch")
