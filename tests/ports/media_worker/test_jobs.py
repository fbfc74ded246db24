"""The transcode job store: due jobs are claimed oldest first under a lease, every later write is fenced by
that lease (by the store's clock), and recovery finds and releases exactly the leases it read."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from media_worker.domain.keys import output_key
from media_worker.service_layer.ports import ClaimedJob
from tests.ports.media_worker.conftest import Backend, BackendContract, InMemory, OnPostgres
from tests.ports.media_worker.records import add_material, outputs_of
from yovision_platform.errors import LeaseLost

OWNER = "media-a"
LEASE_SECONDS = 60.0
EXPIRED = 0.0  # a lease of no length: expired for every later transaction


FENCED_WRITES = ("start", "renew", "finish", "release")


class TransactionFailed(Exception):
    pass


async def fenced(backend: Backend, write: str, claimed: ClaimedJob) -> None:
    async with backend.uow() as uow:
        if write == "start":
            await uow.jobs.start(claimed.job_id, claimed.lease)
        elif write == "renew":
            await uow.jobs.renew(claimed.job_id, claimed.lease, LEASE_SECONDS)
        elif write == "finish":
            await uow.jobs.finish(claimed.job_id, claimed.lease, state="done")
        else:
            await uow.jobs.release(claimed.job_id, claimed.lease)


async def claim_then_fail(backend: Backend) -> None:
    async with backend.uow() as uow:
        assert await uow.jobs.claim(OWNER, LEASE_SECONDS) is not None
        raise TransactionFailed


class JobStoreContract(BackendContract):
    async def _claim(
        self, backend: Backend, owner: str = OWNER, lease_seconds: float = LEASE_SECONDS
    ) -> ClaimedJob | None:
        async with backend.uow() as uow:
            return await uow.jobs.claim(owner, lease_seconds)

    async def _claimed(
        self, backend: Backend, owner: str = OWNER, lease_seconds: float = LEASE_SECONDS
    ) -> ClaimedJob:
        claimed = await self._claim(backend, owner, lease_seconds)
        assert claimed is not None
        return claimed

    async def _started(self, backend: Backend, owner: str = OWNER) -> ClaimedJob:
        claimed = await self._claimed(backend, owner)
        async with backend.uow() as uow:
            await uow.jobs.start(claimed.job_id, claimed.lease)
        return claimed

    async def test_a_pending_job_is_claimed_once_under_a_lease(self, backend: Backend) -> None:
        material_id = await add_material(backend.uow)
        claimed = await self._claimed(backend)
        assert (claimed.material_id, claimed.lease.owner) == (material_id, OWNER)
        assert await self._claim(backend, "media-b") is None

    async def test_jobs_are_claimed_oldest_first(self, backend: Backend) -> None:
        materials = [await add_material(backend.uow) for _ in range(3)]
        claimed = [(await self._claimed(backend)).material_id for _ in materials]
        assert claimed == materials
        assert await self._claim(backend) is None

    async def test_starting_counts_the_attempts(self, backend: Backend) -> None:
        await add_material(backend.uow)
        first = await self._claimed(backend, lease_seconds=LEASE_SECONDS)
        async with backend.uow() as uow:
            assert await uow.jobs.start(first.job_id, first.lease) == 1
            await uow.jobs.release(first.job_id, first.lease)
        second = await self._claimed(backend)
        async with backend.uow() as uow:
            assert await uow.jobs.start(second.job_id, second.lease) == 2

    async def test_an_expired_lease_writes_nothing_and_its_job_is_claimed_again(
        self, backend: Backend
    ) -> None:
        await add_material(backend.uow)
        stale = await self._claimed(backend, lease_seconds=EXPIRED)
        for write in FENCED_WRITES:
            with pytest.raises(LeaseLost):
                await fenced(backend, write, stale)
        successor = await self._claimed(backend, "media-b")
        assert successor.job_id == stale.job_id and successor.lease.token != stale.lease.token
        with pytest.raises(LeaseLost):
            async with backend.uow() as uow:
                await uow.jobs.start(
                    stale.job_id, replace(stale.lease, expires_at=successor.lease.expires_at)
                )
        async with backend.uow() as uow:
            assert await uow.jobs.start(successor.job_id, successor.lease) == 1

    async def test_another_token_or_owner_is_fenced_off(self, backend: Backend) -> None:
        await add_material(backend.uow)
        claimed = await self._claimed(backend)
        for lease in (replace(claimed.lease, token=uuid.uuid4()), replace(claimed.lease, owner="media-b")):
            with pytest.raises(LeaseLost):
                async with backend.uow() as uow:
                    await uow.jobs.renew(claimed.job_id, lease, LEASE_SECONDS)
        async with backend.uow() as uow:
            await uow.jobs.renew(claimed.job_id, claimed.lease, LEASE_SECONDS)

    async def test_a_renewal_runs_the_lease_from_now(self, backend: Backend) -> None:
        await add_material(backend.uow)
        claimed = await self._claimed(backend)
        async with backend.uow() as uow:
            await uow.jobs.renew(claimed.job_id, claimed.lease, EXPIRED)
        with pytest.raises(LeaseLost):
            async with backend.uow() as uow:
                await uow.jobs.start(claimed.job_id, claimed.lease)

    @pytest.mark.parametrize("state", ["done", "failed"])
    async def test_a_finished_job_is_never_claimed_again(self, backend: Backend, state: str) -> None:
        await add_material(backend.uow)
        claimed = await self._started(backend)
        async with backend.uow() as uow:
            await uow.jobs.finish(
                claimed.job_id, claimed.lease, state=state, error_code="x" if state else None
            )
        with pytest.raises(LeaseLost):  # the lease ended with it
            async with backend.uow() as uow:
                await uow.jobs.renew(claimed.job_id, claimed.lease, LEASE_SECONDS)
        assert await self._claim(backend) is None

    async def test_a_reset_failed_job_is_due_again_and_a_done_one_is_not(self, backend: Backend) -> None:
        failed, done = await add_material(backend.uow), await add_material(backend.uow)
        for state in ("failed", "done"):
            claimed = await self._started(backend)
            async with backend.uow() as uow:
                await uow.jobs.finish(claimed.job_id, claimed.lease, state=state, error_code="ffmpeg_failed")
        async with backend.uow() as uow:
            await uow.jobs.reset_failed(done)
            await uow.jobs.reset_failed(failed)
        assert (await self._claimed(backend)).material_id == failed
        assert await self._claim(backend) is None

    async def test_a_released_job_is_due_at_once(self, backend: Backend) -> None:
        await add_material(backend.uow)
        claimed = await self._started(backend)
        async with backend.uow() as uow:
            await uow.jobs.release(claimed.job_id, claimed.lease)
        async with backend.uow() as uow:
            assert await uow.jobs.leases_of(OWNER) == []
        assert (await self._claimed(backend, "media-b")).job_id == claimed.job_id

    async def test_the_next_lease_expiry_is_that_of_the_earliest_current_lease(
        self, backend: Backend
    ) -> None:
        async with backend.uow() as uow:
            assert await uow.jobs.next_lease_expiry_in() is None
        await add_material(backend.uow)
        await add_material(backend.uow)
        await self._claimed(backend, lease_seconds=EXPIRED)  # expired: not a current lease
        claimed = await self._claimed(backend, lease_seconds=LEASE_SECONDS)
        async with backend.uow() as uow:
            expiry = await uow.jobs.next_lease_expiry_in()
        assert expiry is not None and 0 < expiry <= LEASE_SECONDS
        async with backend.uow() as uow:
            await uow.jobs.finish(claimed.job_id, claimed.lease, state="done")
        async with backend.uow() as uow:
            assert await uow.jobs.next_lease_expiry_in() is None

    async def test_the_leases_of_an_owner_are_its_current_leases_on_running_jobs(
        self, backend: Backend
    ) -> None:
        materials = [await add_material(backend.uow) for _ in range(4)]
        running = await self._started(backend)
        later = await self._started(backend)
        await self._claimed(backend)  # claimed, never started: not running
        await self._started(backend, "media-b")
        async with backend.uow() as uow:
            held = await uow.jobs.leases_of(OWNER)
        assert [(h.job_id, h.material_id, h.token) for h in held] == [
            (running.job_id, materials[0], running.lease.token),
            (later.job_id, materials[1], later.lease.token),
        ]

    async def test_a_dead_lease_is_released_only_as_it_was_read(self, backend: Backend) -> None:
        await add_material(backend.uow)
        await add_material(backend.uow)
        running = await self._started(backend)
        pending = await self._claimed(backend)
        async with backend.uow() as uow:
            assert await uow.jobs.release_dead_lease(running.job_id, OWNER, uuid.uuid4()) is False
            assert await uow.jobs.release_dead_lease(running.job_id, "media-b", running.lease.token) is False
            assert await uow.jobs.release_dead_lease(pending.job_id, OWNER, pending.lease.token) is False
            assert await uow.jobs.release_dead_lease(running.job_id, OWNER, running.lease.token) is True
        with pytest.raises(LeaseLost):
            async with backend.uow() as uow:
                await uow.jobs.renew(running.job_id, running.lease, LEASE_SECONDS)
        assert (await self._claimed(backend, "media-b")).job_id == running.job_id

    async def test_live_tokens_are_current_leases_and_recorded_outputs_of_the_materials_asked(
        self, backend: Backend
    ) -> None:
        leased_material, done_material = await add_material(backend.uow), await add_material(backend.uow)
        leased = await self._started(backend)
        finished = await self._started(backend)
        recorded_token, stray_token = uuid.uuid4(), uuid.uuid4()
        async with backend.uow() as uow:
            await uow.jobs.finish(finished.job_id, finished.lease, state="done")
            outputs = outputs_of(done_material, recorded_token)
            await uow.materials.complete(done_material, {**outputs, "clip_10s": "outputs/elsewhere"})
        asked = [leased.lease.token, finished.lease.token, recorded_token, stray_token]
        async with backend.uow() as uow:
            assert await uow.jobs.live_tokens(asked) == {leased.lease.token}
            assert await uow.jobs.live_tokens(asked, [done_material]) == {leased.lease.token, recorded_token}
            assert await uow.jobs.live_tokens([], [leased_material]) == set()
        assert output_key(done_material, recorded_token, "cover.jpg") == outputs["cover"]

    async def test_a_rolled_back_claim_leaves_the_job_due(self, backend: Backend) -> None:
        await add_material(backend.uow)
        with pytest.raises(TransactionFailed):
            await claim_then_fail(backend)
        assert await self._claim(backend) is not None


class TestPostgresJobStore(OnPostgres, JobStoreContract):
    pass


class TestMemoryJobStore(InMemory, JobStoreContract):
    pass
