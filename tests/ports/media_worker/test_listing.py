"""The instance store and the listings: instances with their drain request and leased jobs, the last seen
first; an owner's materials newest first, keyset-paged, ties by id."""

from __future__ import annotations

from tests.ports.media_worker.conftest import Backend, BackendContract, InMemory, OnPostgres
from tests.ports.media_worker.records import OWNER, add_material, new_material


class ListingContract(BackendContract):
    async def _instances(self, backend: Backend, limit: int = 100) -> list[tuple[str, bool, int]]:
        async with backend.uow() as uow:
            listed = await uow.listing.instances(limit)
        assert all(i.started_at <= i.seen_at for i in listed)
        return [(i.instance_id, i.draining, i.leased_jobs) for i in listed]

    async def test_a_registered_instance_is_listed_not_draining(self, backend: Backend) -> None:
        assert await self._instances(backend) == []
        async with backend.uow() as uow:
            await uow.instances.register("media-a")
        assert await self._instances(backend) == [("media-a", False, 0)]

    async def test_a_drain_request_is_recorded_until_the_next_registration(self, backend: Backend) -> None:
        async with backend.uow() as uow:
            await uow.instances.register("media-a")
        async with backend.uow() as uow:
            await uow.instances.set_draining("media-a")
            await uow.instances.set_draining("media-unknown")  # recorded even before it registered
        assert sorted(await self._instances(backend)) == [("media-a", True, 0), ("media-unknown", True, 0)]
        async with backend.uow() as uow:
            await uow.instances.register("media-a")
        assert ("media-a", False, 0) in await self._instances(backend)

    async def test_instances_are_listed_last_seen_first_then_by_id(self, backend: Backend) -> None:
        for instance_id in ("media-a", "media-b"):
            async with backend.uow() as uow:
                await uow.instances.register(instance_id)
        async with backend.uow() as uow:
            await uow.instances.register("media-d")
            await uow.instances.register("media-c")
        assert [i for i, _, _ in await self._instances(backend)] == [
            "media-c",
            "media-d",
            "media-b",
            "media-a",
        ]
        async with backend.uow() as uow:
            await uow.instances.register("media-a")
        assert [i for i, _, _ in await self._instances(backend, 2)] == ["media-a", "media-c"]

    async def test_leased_jobs_count_the_running_jobs_under_a_current_lease(self, backend: Backend) -> None:
        for _ in range(4):
            await add_material(backend.uow)
        async with backend.uow() as uow:
            await uow.instances.register("media-a")
        for start, expire in ((True, False), (True, False), (False, False), (True, True)):
            async with backend.uow() as uow:
                claimed = await uow.jobs.claim("media-a", 60.0)
                assert claimed is not None
                if start:
                    await uow.jobs.start(claimed.job_id, claimed.lease)
                if expire:
                    await uow.jobs.renew(claimed.job_id, claimed.lease, 0.0)
        assert await self._instances(backend) == [("media-a", False, 2)]

    async def test_an_owners_materials_are_listed_newest_first_in_pages(self, backend: Backend) -> None:
        older = [await add_material(backend.uow) for _ in range(2)]
        same_time = [new_material() for _ in range(3)]
        async with backend.uow() as uow:
            for material in same_time:
                await uow.materials.add(material)
        await add_material(backend.uow, "user-2")
        newest_first = sorted((m.material_id for m in same_time), reverse=True) + older[::-1]
        async with backend.uow() as uow:
            first = await uow.listing.materials(OWNER, 2, None)
            assert [m.material_id for m in first] == newest_first[:2]
            after = (first[-1].created_at, first[-1].material_id)
            rest = await uow.listing.materials(OWNER, 10, after)
            assert [m.material_id for m in rest] == newest_first[2:]
            assert all(m.owner == OWNER and m.shown_source_key is None for m in first + rest)
            assert await uow.listing.materials("user-3", 10, None) == []


class TestPostgresListing(OnPostgres, ListingContract):
    pass


class TestMemoryListing(InMemory, ListingContract):
    pass
