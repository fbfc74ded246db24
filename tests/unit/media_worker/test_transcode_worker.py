"""The transcode worker and its recovery on the fakes: outcomes, fencing by the lease, hand-backs, and the
sweep of dead attempts' folders. The same on real PostgreSQL, real ffmpeg and killed processes:
tests/integration/media_worker (test_transcoder, test_recovery, test_process)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import pytest

from media_worker.domain.keys import output_key, source_key, work_folder_name
from media_worker.domain.material import MaterialStatus
from media_worker.entrypoints.transcode_worker import TranscodeWorker
from tests.unit.media_worker.conftest import INSTANCE, OWNER, Fakes, wait_until

OUTPUT_KINDS = ["clip_10s", "cover", "preview_720p"]


def job_of(fakes: Fakes, material_id: uuid.UUID) -> tuple[str, int, str | None, str | None]:
    """(state, attempt, error code, lease owner) of the material's job, as the fake stores it."""
    (job,) = [j for j in fakes.db.tables.jobs.values() if j.material_id == material_id]
    return job.state, job.attempt, job.error_code, job.lease.owner if job.lease else None


def transcodes(fakes: Fakes, outcome: str) -> float | None:
    return fakes.registry.get_sample_value("media_transcodes_total", {"outcome": outcome})


async def abandon(fakes: Fakes, material_id: uuid.UUID, *, owner: str, lease_seconds: float) -> uuid.UUID:
    """Make the material's job look like a crashed attempt of `owner`; returns its lease token."""
    async with fakes.uow() as uow:
        claimed = await uow.jobs.claim(owner, lease_seconds)
        assert claimed is not None and claimed.material_id == material_id
        await uow.jobs.start(claimed.job_id, claimed.lease)
        await uow.materials.set_processing(material_id)
        await uow.materials.raise_progress(material_id, 72)
    return claimed.lease.token


async def test_a_job_produces_every_output_and_keeps_the_source(fakes: Fakes) -> None:
    material_id = await fakes.upload()
    source = fakes.source(material_id)
    assert await fakes.worker().run_once() is True
    material = await fakes.material(material_id)
    assert (material.status, material.progress, material.error_code) == (MaterialStatus.DONE, 100, None)
    assert sorted(material.outputs) == OUTPUT_KINDS
    assert all(fakes.storage.has_file(key) for key in material.outputs.values())
    assert fakes.source(material_id) == source
    assert fakes.events() == ["MaterialUploaded", "TranscodeStarted", "TranscodeCompleted"]
    (completed,) = fakes.event_payloads("TranscodeCompleted")
    assert (completed["attempt"], completed["instance_id"], completed["outputs"]) == (
        1,
        INSTANCE,
        ["cover", "preview_720p", "clip_10s"],
    )
    assert job_of(fakes, material_id) == ("done", 1, None, None)
    assert fakes.storage.work_folders() == [] and fakes.activity.jobs == 0
    assert transcodes(fakes, "done") == 1
    assert await fakes.worker().run_once() is False


async def test_completion_fills_only_output_references_still_empty(fakes: Fakes) -> None:
    material_id = await fakes.upload()
    fakes.db.tables.materials[material_id].outputs["cover"] = "outputs/x/cover.jpg"  # a concurrent writer's
    await fakes.worker().run_once()
    material = await fakes.material(material_id)
    assert material.status == MaterialStatus.DONE
    assert material.outputs["cover"] == "outputs/x/cover.jpg" and "preview_720p" in material.outputs


@pytest.mark.parametrize(
    ("breakage", "code", "retryable"),
    [("missing_tool", "ffmpeg_missing", True), ("broken_outputs", "cover_invalid", False)],
)
async def test_a_failed_transcode_is_recorded_with_its_code_and_keeps_the_source(
    fakes: Fakes, breakage: str, code: str, retryable: bool
) -> None:
    material_id = await fakes.upload()
    source = fakes.source(material_id)
    setattr(fakes.tools, breakage, True)
    await fakes.worker().run_once()
    material = await fakes.material(material_id)
    assert (material.status, material.error_code, dict(material.outputs)) == (MaterialStatus.FAILED, code, {})
    assert fakes.source(material_id) == source
    assert fakes.events() == ["MaterialUploaded", "TranscodeStarted", "TranscodeFailed"]
    (failed,) = fakes.event_payloads("TranscodeFailed")
    assert (failed["error_code"], failed["retryable"]) == (code, retryable)
    assert job_of(fakes, material_id) == ("failed", 1, code, None)
    assert transcodes(fakes, "failed") == 1
    assert fakes.storage.work_folders() == [] and fakes.storage.output_folders() == []


async def test_a_missing_source_fails_the_job(fakes: Fakes) -> None:
    material_id = await fakes.upload()
    del fakes.storage.files[source_key(material_id)]
    await fakes.worker().run_once()
    assert (await fakes.material(material_id)).error_code == "source_missing"


async def test_a_failed_material_can_be_retried_and_then_succeeds(fakes: Fakes) -> None:
    material_id = await fakes.upload()
    fakes.tools.missing_tool = True
    await fakes.worker().run_once()
    await fakes.use_cases.materials.retry(OWNER, material_id)
    fakes.tools.missing_tool = False
    await fakes.worker().run_once()
    assert (await fakes.material(material_id)).status == MaterialStatus.DONE
    assert job_of(fakes, material_id) == ("done", 2, None, None)


async def test_a_stolen_lease_aborts_the_render_and_writes_nothing(fakes: Fakes) -> None:
    material_id = await fakes.upload()
    fakes.tools.hold = asyncio.Event()
    task = asyncio.ensure_future(fakes.worker(lease_seconds=0.03).run_once())
    await wait_until(fakes.tools.rendering.is_set)
    (job,) = fakes.db.tables.jobs.values()
    assert job.lease is not None
    job.lease = replace(job.lease, owner="thief", token=uuid.uuid4())
    assert await asyncio.wait_for(task, 5) is True
    material = await fakes.material(material_id)
    assert (material.status, dict(material.outputs)) == (MaterialStatus.PROCESSING, {})
    assert job_of(fakes, material_id) == ("running", 1, None, "thief")
    assert fakes.events() == ["MaterialUploaded", "TranscodeStarted"]
    assert transcodes(fakes, "aborted") == 1
    assert fakes.storage.work_folders() == [] and fakes.storage.has_file(source_key(material_id))


async def test_a_worker_paused_past_its_lease_is_fenced_and_a_successor_finishes(fakes: Fakes) -> None:
    material_id = await fakes.upload()
    fakes.tools.hold = asyncio.Event()
    task = asyncio.ensure_future(fakes.worker(lease_seconds=0.03).run_once())
    await wait_until(fakes.tools.rendering.is_set)
    fakes.clock.advance(1.0)  # as if paused: the lease expired without a renewal
    await asyncio.wait_for(task, 5)
    fakes.tools.hold = None
    assert await fakes.worker(instance_id="media-test-b").run_once() is True
    assert (await fakes.material(material_id)).status == MaterialStatus.DONE
    assert job_of(fakes, material_id) == ("done", 2, None, None)
    assert fakes.events() == [
        "MaterialUploaded",
        "TranscodeStarted",
        "TranscodeStarted",
        "TranscodeCompleted",
    ]


async def test_stopping_the_worker_aborts_the_render_and_hands_the_job_back(fakes: Fakes) -> None:
    material_id = await fakes.upload()
    fakes.tools.hold = asyncio.Event()
    stop = asyncio.Event()
    runner = asyncio.ensure_future(TranscodeWorker(fakes.worker()).run(stop))
    await wait_until(fakes.tools.rendering.is_set)
    stop.set()
    await asyncio.wait_for(runner, 5)
    assert job_of(fakes, material_id) == ("pending", 1, None, None)
    assert (await fakes.material(material_id)).status == MaterialStatus.PENDING
    assert fakes.storage.has_file(source_key(material_id)) and fakes.storage.work_folders() == []


async def test_a_material_locked_by_another_executor_is_handed_back(fakes: Fakes) -> None:
    material_id = await fakes.upload()
    async with fakes.locks.material(material_id) as other_executor:
        assert other_executor
        assert await fakes.worker().run_once() is True
    assert job_of(fakes, material_id) == ("pending", 0, None, None)
    assert fakes.events() == ["MaterialUploaded"] and fakes.tools.renders == []


async def test_start_up_recovery_takes_over_a_job_whose_executor_died(fakes: Fakes) -> None:
    material_id = await fakes.upload()
    await abandon(fakes, material_id, owner="media-dead", lease_seconds=30.0)
    fakes.clock.advance(31.0)
    stop = asyncio.Event()
    runner = asyncio.ensure_future(TranscodeWorker(fakes.worker()).run(stop))
    await wait_until(lambda: "TranscodeCompleted" in fakes.events())
    stop.set()
    await asyncio.wait_for(runner, 5)
    assert job_of(fakes, material_id) == ("done", 2, None, None)


async def test_a_restart_with_the_same_instance_id_releases_its_predecessors_leases_at_once(
    fakes: Fakes,
) -> None:
    material_id = await fakes.upload()
    await abandon(fakes, material_id, owner=INSTANCE, lease_seconds=120.0)
    recovery = fakes.worker().recovery
    async with fakes.locks.material(material_id) as live_executor:  # a live process with this id runs it
        assert live_executor
        assert await recovery.release_predecessor_leases() == 0
    assert job_of(fakes, material_id) == ("running", 1, None, INSTANCE)
    assert await fakes.worker(instance_id="media-test-other").recovery.release_predecessor_leases() == 0
    assert await recovery.release_predecessor_leases() == 1
    assert job_of(fakes, material_id) == ("pending", 1, None, None)
    assert (await fakes.material(material_id)).status == MaterialStatus.PENDING


async def test_dead_attempts_folders_are_swept_and_live_or_recorded_ones_kept(fakes: Fakes) -> None:
    dead_material, live_material, done_material = [await fakes.upload() for _ in range(3)]
    dead_token = await abandon(fakes, dead_material, owner="media-dead", lease_seconds=30.0)
    live_token = await abandon(fakes, live_material, owner="media-other", lease_seconds=120.0)
    fakes.clock.advance(31.0)  # the dead attempt's lease expired, the live one's runs on
    async with fakes.uow() as uow:  # a successor took the dead attempt's job over: its token is dead for good
        successor = await uow.jobs.claim("media-b", 60.0)
    assert successor is not None and successor.material_id == dead_material
    storage = fakes.storage
    for material, token in ((dead_material, dead_token), (live_material, live_token)):
        job = next(j.job_id for j in fakes.db.tables.jobs.values() if j.material_id == material)
        storage.write_local(storage.work_dir(work_folder_name(job, token)) / "cover.jpg", b"partial")
        storage.files[output_key(material, token, "cover.jpg")] = b"unrecorded"
    recorded, stray = uuid.uuid4(), uuid.uuid4()
    for token in (recorded, stray):
        storage.files[output_key(done_material, token, "cover.jpg")] = b"cover"
    async with fakes.uow() as uow:
        await uow.materials.complete(
            done_material, {k: output_key(done_material, recorded, "cover.jpg") for k in OUTPUT_KINDS}
        )

    recovery = fakes.worker().recovery
    assert await recovery.sweep_work_folders() == 1
    assert await recovery.sweep_output_folders() == 2
    assert [f.token for f in storage.work_folders()] == [live_token]
    assert sorted(f.token for f in storage.output_folders()) == sorted([live_token, recorded])
    assert storage.has_file(source_key(dead_material))


async def test_an_output_folder_of_a_material_being_run_is_left_to_its_executor(fakes: Fakes) -> None:
    material_id = await fakes.upload()
    fakes.storage.files[output_key(material_id, uuid.uuid4(), "cover.jpg")] = b"dead attempt's"
    async with fakes.locks.material(material_id):
        assert await fakes.worker().recovery.sweep_output_folders() == 0
    assert await fakes.worker().recovery.sweep_output_folders() == 1
