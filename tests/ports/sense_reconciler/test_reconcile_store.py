"""The `ReconcileStore` port: claims by partition, server and due time; every later write fenced by the
lease (by the store's clock); placements, drift marks and ownership. PostgreSQL and the fake alike."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from sense_reconciler.domain import limits
from sense_reconciler.domain.reconcile import ClaimedItem, Convergence, WorkItem
from sense_reconciler.domain.records import DeviceUpdate, StoredSource
from tests.support.sense_backends import Backend, new_device, register, wait_for
from yovision_platform.errors import LeaseLost
from yovision_platform.storage import Lease

PARTITIONS = list(range(12))
REASON = "invalid source: <redacted>"


async def claim(
    backend: Backend,
    owner: str = "a",
    *,
    partitions: list[int] = PARTITIONS,
    server: str = "default",
    lease_seconds: float = 30.0,
    limit: int = limits.CLAIM_BATCH_MAX_ITEMS,
) -> list[ClaimedItem]:
    async with backend.units() as uow:
        return await uow.reconcile.claim(
            owner, partitions, media_server=server, lease_seconds=lease_seconds, limit=limit
        )


async def claimed_ids(backend: Backend, owner: str = "a", **kwargs: object) -> list[uuid.UUID]:
    return [item.device_id for item in await claim(backend, owner, **kwargs)]  # type: ignore[arg-type]


async def expired(backend: Backend, device_id: uuid.UUID) -> None:
    """Wait until another owner can claim `device_id` (its lease ran out), and release it again."""

    async def claimable() -> bool:
        got = [i for i in await claim(backend, "prober", lease_seconds=30) if i.device_id == device_id]
        for item in got:
            async with backend.units() as uow:
                await uow.reconcile.release(item)
        return bool(got)

    await wait_for(claimable)


class ReconcileStoreContract:
    @pytest.fixture
    def backend(self) -> Backend:
        raise NotImplementedError

    async def test_a_claim_takes_due_rows_of_its_partitions_and_server_in_due_order(
        self, backend: Backend
    ) -> None:
        first = await register(backend, partition=3)
        second = await register(backend, partition=3)
        other_partition = await register(backend, partition=4)
        other_server = await register(backend, partition=3, server="mtx-b", site_id="site-b")
        assert await claim(backend, partitions=[]) == []
        got = await claim(backend, partitions=[3], limit=1)
        assert [i.device_id for i in got] == [first], "the oldest due first"
        assert (got[0].partition, got[0].attempts, got[0].media_server_id) == (3, 0, "default")
        assert got[0].lease.owner == "a"
        assert await claimed_ids(backend, "b", partitions=[3]) == [second]
        assert await claimed_ids(backend, "c", partitions=[3]) == [], "leased rows are not claimed again"
        assert await claimed_ids(backend, "c", partitions=[3, 4]) == [other_partition]
        assert await claimed_ids(backend, "c", partitions=[3], server="mtx-b") == [other_server]

    async def test_rows_due_at_the_same_time_are_claimed_in_device_id_order(self, backend: Backend) -> None:
        ids = [uuid.uuid4() for _ in range(4)]
        async with backend.units() as uow:  # one transaction: due at the same moment
            await uow.sites.lock("tenant-a", "site-1", new_site_server="default")
            for device_id in ids:
                await uow.devices.add(new_device(device_id=device_id))
                await uow.devices.insert_due_row(device_id, 0, "default")
        assert await claimed_ids(backend, limit=2) == sorted(ids)[:2]
        assert await claimed_ids(backend, "b") == sorted(ids)[2:]

    async def test_a_claim_of_unregistered_servers_takes_only_those(self, backend: Backend) -> None:
        await register(backend)
        gone = await register(backend, server="mtx-gone", site_id="site-gone")
        async with backend.units() as uow:
            got = await uow.reconcile.claim_unregistered(
                "a", PARTITIONS, registered=["default", "mtx-b"], lease_seconds=30, limit=10
            )
        assert [i.device_id for i in got] == [gone]

    @pytest.mark.parametrize("limit", [0, limits.CLAIM_BATCH_MAX_ITEMS + 1])
    async def test_a_claim_batch_outside_1_to_128_is_refused(self, backend: Backend, limit: int) -> None:
        with pytest.raises(ValueError, match="claim batch"):
            await claim(backend, limit=limit)

    @pytest.mark.parametrize("limit", [1, limits.CLAIM_BATCH_MAX_ITEMS])
    async def test_a_claim_batch_of_1_and_of_128_is_taken(self, backend: Backend, limit: int) -> None:
        for _ in range(2):
            await register(backend)
        assert len(await claim(backend, limit=limit)) == min(limit, 2)

    async def test_the_renewal_loads_the_device_and_places_an_enabled_one_on_its_server(
        self, backend: Backend
    ) -> None:
        device_id = await register(backend, partition=5)
        [item] = await claim(backend)
        async with backend.units() as uow:
            work = await uow.reconcile.renew_and_load(item, lease_seconds=30)
        assert (work.device_id, work.tenant_id, work.site_id, work.desired_state) == (
            device_id,
            "tenant-a",
            "site-1",
            "enabled",
        )
        assert (work.media_server_id, work.generation, work.source) == (
            "default",
            1,
            StoredSource(b"sealed", None),
        )
        assert (work.placements, work.placed_now) == (frozenset({"default"}), True)
        assert work.lease.token == item.lease.token and work.lease.expires_at >= item.lease.expires_at
        async with backend.units() as uow:
            again = await uow.reconcile.renew_and_load(item, lease_seconds=30)
        assert (again.placements, again.placed_now) == (frozenset({"default"}), False)

    async def test_a_disabled_device_is_not_placed(self, backend: Backend) -> None:
        await register(backend, desired_state="disabled")
        [item] = await claim(backend)
        async with backend.units() as uow:
            work = await uow.reconcile.renew_and_load(item, lease_seconds=30)
        assert (work.placements, work.placed_now) == (frozenset(), False)

    async def test_a_renewal_keeps_the_token_and_extends_the_lease(self, backend: Backend) -> None:
        await register(backend)
        [item] = await claim(backend, lease_seconds=5)
        async with backend.units() as uow:
            work = await uow.reconcile.renew_and_load(item, lease_seconds=5)
        async with backend.units() as uow:
            renewed = await uow.reconcile.renew(work, work.lease, lease_seconds=60)
        assert renewed.token == work.lease.token and renewed.owner == work.lease.owner
        assert (renewed.expires_at - work.lease.expires_at).total_seconds() >= 50
        async with backend.units() as uow:  # the renewed lease is the current one: it completes
            await uow.reconcile.complete(work, renewed)

    async def test_a_dropped_placement_is_gone_and_the_lease_renewed(self, backend: Backend) -> None:
        await register(backend)
        [item] = await claim(backend)
        async with backend.units() as uow:
            work = await uow.reconcile.renew_and_load(item, lease_seconds=30)
        async with backend.units() as uow:
            renewed = await uow.reconcile.drop_placement(work, work.lease, "default", lease_seconds=30)
        assert renewed.token == work.lease.token and renewed.expires_at >= work.lease.expires_at
        async with backend.units() as uow:
            await uow.devices.update(
                item.device_id, DeviceUpdate(name="cam", source_uri_ciphertext=None, desired_state="disabled")
            )
        async with backend.units() as uow:
            disabled = await uow.reconcile.renew_and_load(item, lease_seconds=30)
        assert disabled.placements == frozenset()

    async def test_an_expired_lease_fences_every_write_and_frees_the_row(self, backend: Backend) -> None:
        device_id = await register(backend)
        [stale] = await claim(backend, "stale", lease_seconds=0.2)
        async with backend.units() as uow:
            work = await uow.reconcile.renew_and_load(stale, lease_seconds=0.2)
        await expired(backend, device_id)
        async with backend.units() as uow:
            with pytest.raises(LeaseLost):
                await uow.reconcile.renew_and_load(stale, lease_seconds=30)
            with pytest.raises(LeaseLost):
                await uow.reconcile.renew(work, work.lease, lease_seconds=30)
            with pytest.raises(LeaseLost):
                await uow.reconcile.drop_placement(work, work.lease, "default", lease_seconds=30)
            with pytest.raises(LeaseLost):
                await uow.reconcile.complete(work, work.lease)
            with pytest.raises(LeaseLost):
                await uow.reconcile.fail(stale, work.lease, error_code="x", retry_in_seconds=1)
            with pytest.raises(LeaseLost):
                await uow.reconcile.release(stale)
        [successor] = await claim(backend, "successor")
        assert successor.device_id == device_id and successor.lease.token != stale.lease.token

    async def test_another_owners_lease_fences_off_a_forged_one(self, backend: Backend) -> None:
        await register(backend)
        [item] = await claim(backend, "a")
        forged = dataclasses.replace(item, lease=Lease("a", uuid.uuid4(), item.lease.expires_at))
        async with backend.units() as uow:
            with pytest.raises(LeaseLost):
                await uow.reconcile.renew_and_load(forged, lease_seconds=30)

    async def test_a_source_change_is_loaded_until_a_completion_observes_the_newest_generation(
        self, backend: Backend
    ) -> None:
        device_id = await register(backend)

        async def loaded() -> WorkItem:
            [item] = await claim(backend)
            async with backend.units() as uow:
                return await uow.reconcile.renew_and_load(item, lease_seconds=30)

        async def completed(work: WorkItem) -> None:
            async with backend.units() as uow:
                await uow.reconcile.complete(work, work.lease)

        async def marked(*, replace_due: bool) -> None:
            async with backend.units() as uow:
                await uow.devices.mark_due(device_id, "default", replace_due=replace_due)

        first = await loaded()
        assert not first.replace_due
        await completed(first)
        await marked(replace_due=True)
        changed = await loaded()
        assert changed.replace_due
        await marked(replace_due=False)  # a rename while the change is in flight keeps the mark
        await completed(changed)
        renamed = await loaded()
        assert renamed.replace_due and renamed.generation == changed.generation + 1
        await completed(renamed)
        await marked(replace_due=False)
        assert not (await loaded()).replace_due

    async def test_completion_converges_unless_a_newer_generation_arrived(self, backend: Backend) -> None:
        converged, changed = await register(backend), await register(backend)
        items = {i.device_id: i for i in await claim(backend)}
        for device_id in (converged, changed):
            async with backend.units() as uow:
                work = await uow.reconcile.renew_and_load(items[device_id], lease_seconds=30)
            if device_id == changed:
                async with backend.units() as uow:
                    await uow.devices.mark_due(changed, "default")
            async with backend.units() as uow:
                await uow.reconcile.complete(work, work.lease)
        async with backend.units() as uow:
            done = await uow.devices.reconcile_state(converged)
            newer = await uow.devices.reconcile_state(changed)
            assert await uow.reconcile.convergence("default") == Convergence(1, 0)
        assert done is not None and newer is not None
        assert (done.status, done.observed_generation, done.attempts, done.last_error_code) == (
            "converged",
            1,
            0,
            None,
        )
        assert done.last_result_at is not None
        assert (newer.status, newer.observed_generation, newer.desired_generation) == ("pending", 1, 2)
        assert await claimed_ids(backend, "b") == [changed], "the newer generation is due at once"

    async def test_a_failure_keeps_its_code_and_waits_out_its_backoff(self, backend: Backend) -> None:
        device_id = await register(backend)
        [item] = await claim(backend)
        async with backend.units() as uow:
            await uow.reconcile.fail(item, item.lease, error_code="mediamtx_timeout", retry_in_seconds=0.3)
        async with backend.units() as uow:
            state = await uow.devices.reconcile_state(device_id)
            assert await uow.reconcile.convergence("default") == Convergence(1, 0)
        assert state is not None and state.last_result_at is not None and state.next_attempt_at is not None
        assert (state.status, state.attempts, state.last_error_code) == ("failed", 1, "mediamtx_timeout")
        assert state.last_error_reason is None
        assert 0.29 <= (state.next_attempt_at - state.last_result_at).total_seconds() <= 0.31
        assert await claim(backend, "b") == [], "not due before its backoff ends"
        await wait_for(lambda: _claims(backend, "c", device_id))

    async def test_a_refusal_keeps_its_code_and_reason_and_is_never_due_until_a_change(
        self, backend: Backend
    ) -> None:
        device_id = await register(backend)
        [item] = await claim(backend)
        async with backend.units() as uow:
            work = await uow.reconcile.renew_and_load(item, lease_seconds=30)
        async with backend.units() as uow:
            await uow.reconcile.refuse(work, work.lease, error_code="mediamtx_http_400", reason=REASON)
        async with backend.units() as uow:
            state = await uow.devices.reconcile_state(device_id)
            assert await uow.reconcile.convergence("default") == Convergence(1, 1)
            assert await uow.reconcile.convergence("mtx-b") == Convergence(0, 0)
        assert state is not None and state.last_result_at is not None
        assert (state.status, state.attempts, state.next_attempt_at) == ("failed", 1, None)
        assert (state.last_error_code, state.last_error_reason) == ("mediamtx_http_400", REASON)
        assert await claim(backend, "b") == [], "a refused row is not due"
        async with backend.units() as uow:
            await uow.devices.mark_due(device_id, "default")
        [again] = await claim(backend, "c")
        assert again.device_id == device_id
        async with backend.units() as uow:
            retried = await uow.reconcile.renew_and_load(again, lease_seconds=30)
        async with backend.units() as uow:
            await uow.reconcile.complete(retried, retried.lease)
            converged = await uow.devices.reconcile_state(device_id)
            assert await uow.reconcile.convergence("default") == Convergence(0, 0)
        assert converged is not None and converged.next_attempt_at is not None
        assert (converged.status, converged.last_error_code, converged.last_error_reason) == (
            "converged",
            None,
            None,
        )

    async def test_a_refusal_of_an_older_generation_keeps_the_newer_one_due(self, backend: Backend) -> None:
        device_id = await register(backend)
        [item] = await claim(backend)
        async with backend.units() as uow:
            work = await uow.reconcile.renew_and_load(item, lease_seconds=30)
        async with backend.units() as uow:
            await uow.devices.mark_due(device_id, "default")  # the operator fixed it meanwhile
        async with backend.units() as uow:
            await uow.reconcile.refuse(work, work.lease, error_code="mediamtx_http_400", reason=None)
        async with backend.units() as uow:
            state = await uow.devices.reconcile_state(device_id)
            assert await uow.reconcile.convergence("default") == Convergence(1, 0)
        assert state is not None and state.status == "failed" and state.next_attempt_at is not None
        assert await claimed_ids(backend, "b") == [device_id]

    async def test_a_refusal_is_fenced(self, backend: Backend) -> None:
        device_id = await register(backend)
        [item] = await claim(backend)
        async with backend.units() as uow:
            work = await uow.reconcile.renew_and_load(item, lease_seconds=30)
        forged = Lease("a", uuid.uuid4(), work.lease.expires_at)
        async with backend.units() as uow:
            with pytest.raises(LeaseLost):
                await uow.reconcile.refuse(work, forged, error_code="mediamtx_http_400", reason=REASON)
        async with backend.units() as uow:
            state = await uow.devices.reconcile_state(device_id)
        assert state is not None and (state.status, state.attempts, state.last_error_reason) == (
            "pending",
            0,
            None,
        )

    async def test_a_released_row_is_claimable_again_at_once_and_untouched(self, backend: Backend) -> None:
        device_id = await register(backend)
        [item] = await claim(backend)
        async with backend.units() as uow:
            await uow.reconcile.release(item)
        async with backend.units() as uow:
            state = await uow.devices.reconcile_state(device_id)
        assert state is not None and (state.status, state.attempts, state.last_result_at) == (
            "pending",
            0,
            None,
        )
        assert await claimed_ids(backend, "b") == [device_id]

    async def test_drift_marks_take_converged_unleased_results_older_than_the_interval(
        self, backend: Backend
    ) -> None:
        ids = [await register(backend, partition=p) for p in (1, 1, 2)]
        for item in await claim(backend):
            async with backend.units() as uow:
                work = await uow.reconcile.renew_and_load(item, lease_seconds=30)
            async with backend.units() as uow:
                await uow.reconcile.complete(work, work.lease)
        async with backend.units() as uow:
            assert await uow.reconcile.mark_drift_checks([1, 2], older_than_seconds=3600, limit=10) == 0
        async with backend.units() as uow:
            assert await uow.reconcile.mark_drift_checks([], older_than_seconds=0, limit=10) == 0
        await wait_for(lambda: _drift_marks(backend, [1], limit=1, expected=1))
        async with backend.units() as uow:
            assert await uow.reconcile.mark_drift_checks([1], older_than_seconds=0, limit=10) == 1
            states = {s.device_id: s for s in await uow.devices.reconcile_states(ids)}
        assert [states[i].desired_generation for i in ids] == [2, 2, 1]
        assert [states[i].status for i in ids] == ["converged"] * 3
        async with backend.units() as uow:
            assert await uow.reconcile.mark_drift_checks([1, 2], older_than_seconds=0, limit=10) == 1
            after = {s.device_id: s.desired_generation for s in await uow.devices.reconcile_states(ids)}
        assert after == dict.fromkeys(ids, 2), "marked rows are due, not converged: marked once"

    async def test_ownership_keeps_its_first_sighting(self, backend: Backend) -> None:
        await register(backend)
        [item] = await claim(backend)
        async with backend.units() as uow:
            work = await uow.reconcile.renew_and_load(item, lease_seconds=30)
        async with backend.units() as uow:
            first = await uow.reconcile.record_ownership(work)
        async with backend.units() as uow:
            again = await uow.reconcile.record_ownership(work)
        assert first.first_seen_at == first.last_seen_at
        assert again.first_seen_at == first.first_seen_at and again.last_seen_at >= first.last_seen_at

    async def test_unconverged_rows_are_counted_per_server(self, backend: Backend) -> None:
        await register(backend)
        await register(backend)
        await register(backend, server="mtx-b", site_id="site-b")
        async with backend.units() as uow:
            counts = [await uow.reconcile.convergence(s) for s in ("default", "mtx-b", "mtx-c")]
        assert counts == [Convergence(2, 0), Convergence(1, 0), Convergence(0, 0)]


async def _claims(backend: Backend, owner: str, device_id: uuid.UUID) -> bool:
    return device_id in await claimed_ids(backend, owner)


async def _drift_marks(backend: Backend, partitions: list[int], *, limit: int, expected: int) -> bool:
    async with backend.units() as uow:
        marked = await uow.reconcile.mark_drift_checks(partitions, older_than_seconds=0, limit=limit)
    assert marked in (0, expected)
    return marked == expected


class TestPostgresReconcileStore(ReconcileStoreContract):
    @pytest.fixture
    def backend(self, postgres_backend: Backend) -> Backend:
        return postgres_backend


class TestMemoryReconcileStore(ReconcileStoreContract):
    @pytest.fixture
    def backend(self, memory_backend: Backend) -> Backend:
        return memory_backend
