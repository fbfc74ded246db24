"""The `DeviceStore` and `SiteStore` ports in one `SenseUnitOfWork`: PostgreSQL and the fake alike."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from sense_reconciler.domain import limits
from sense_reconciler.domain.errors import PathNameTaken
from sense_reconciler.domain.records import AuditFact, DeviceUpdate, NewDevice, SiteRow, StoredSource
from tests.support.sense_backends import Backend, new_device, register
from yovision_platform.messaging import OutboxMessage


class Failure(Exception):
    pass


def announcement() -> OutboxMessage:
    return OutboxMessage(
        event_id=uuid.uuid4(), event_type="DeviceRegistered", topic="sense.device.v1", key=b"k", value=b"v"
    )


async def write_everything_then_fail(backend: Backend, kept: uuid.UUID, new: NewDevice) -> None:
    async with backend.units() as uow:
        await uow.sites.lock("tenant-a", new.site_id, new_site_server="default")
        device = await uow.devices.add(new)
        await uow.devices.insert_due_row(device.id, 0, "default")
        await uow.devices.mark_due(kept, "mtx-b")
        await uow.devices.update(
            kept, DeviceUpdate(name="lost", source_uri_ciphertext=None, desired_state="disabled")
        )
        await uow.devices.insert_fact(AuditFact(uuid.uuid4(), "device.created", "op", device, []))
        await uow.outbox.enqueue(announcement())
        raise Failure


class DeviceStoreContract:
    @pytest.fixture
    def backend(self) -> Backend:
        raise NotImplementedError

    async def test_an_added_device_reads_back_at_version_1(self, backend: Backend) -> None:
        new = new_device()
        async with backend.units() as uow:
            await uow.sites.lock("tenant-a", "site-1", new_site_server="default")
            added = await uow.devices.add(new)
        async with backend.units() as uow:
            assert await uow.devices.get(new.id) == added
            assert await uow.devices.get(new.id, for_update=True) == added
            assert await uow.devices.get(uuid.uuid4()) is None
            assert await uow.devices.stored_source(new.id) == StoredSource(b"sealed", None)
        assert (added.id, added.path_name, added.config_version) == (new.id, new.path_name, 1)
        assert (added.name, added.desired_state, added.media_server_id) == ("cam", "enabled", "default")
        assert added.created_at == added.updated_at

    async def test_a_taken_path_name_is_refused_and_the_unit_of_work_goes_on(self, backend: Backend) -> None:
        first = new_device(path_name="site-1/cam-1")
        async with backend.units() as uow:
            await uow.sites.lock("tenant-a", "site-1", new_site_server="default")
            await uow.devices.add(first)
            with pytest.raises(PathNameTaken):
                await uow.devices.add(new_device(path_name="site-1/cam-1"))
            with pytest.raises(PathNameTaken):
                await uow.devices.add(new_device(device_id=first.id))
            other = await uow.devices.add(new_device(path_name="site-1/cam-2"))
        async with backend.units() as uow:
            page = await uow.devices.list_page(tenant_id=None, site_id=None, after=None, limit=10)
        assert sorted(d.id for d in page) == sorted([first.id, other.id])

    async def test_pages_go_in_id_order_after_a_cursor_and_filter_by_tenant_and_site(
        self, backend: Backend
    ) -> None:
        async with backend.units() as uow:
            for tenant, site in [("tenant-a", "site-1"), ("tenant-a", "site-2"), ("tenant-b", "site-1")]:
                await uow.sites.lock(tenant, site, new_site_server="default")
            made = [
                await uow.devices.add(new_device(tenant_id=tenant, site_id=site))
                for tenant, site in [("tenant-a", "site-1")] * 3
                + [("tenant-a", "site-2"), ("tenant-b", "site-1")]
            ]
        ids = sorted(d.id for d in made)
        async with backend.units() as uow:
            everything = await uow.devices.list_page(tenant_id=None, site_id=None, after=None, limit=10)
            assert [d.id for d in everything] == ids
            assert [
                d.id for d in await uow.devices.list_page(tenant_id=None, site_id=None, after=ids[1], limit=2)
            ] == ids[2:4]
            of_a = await uow.devices.list_page(tenant_id="tenant-a", site_id=None, after=None, limit=10)
            assert [d.id for d in of_a] == sorted(d.id for d in made[:4])
            of_a1 = await uow.devices.list_page(tenant_id="tenant-a", site_id="site-1", after=None, limit=10)
            assert [d.id for d in of_a1] == sorted(d.id for d in made[:3])
            of_site = await uow.devices.list_page(tenant_id=None, site_id="site-1", after=None, limit=10)
            assert [d.id for d in of_site] == sorted(d.id for d in made[:3] + made[4:])
            assert [d.id for d in await uow.devices.of_site("tenant-a", "site-1")] == sorted(
                d.id for d in made[:3]
            )
            assert await uow.devices.of_site("tenant-a", "site-9") == []

    async def test_only_enabled_devices_of_the_site_count(self, backend: Backend) -> None:
        async with backend.units() as uow:
            for site in ("site-1", "site-2"):
                await uow.sites.lock("tenant-a", site, new_site_server="default")
            await uow.devices.add(new_device(desired_state="enabled"))
            await uow.devices.add(new_device(desired_state="enabled"))
            await uow.devices.add(new_device(desired_state="disabled"))
            await uow.devices.add(new_device(site_id="site-2", desired_state="enabled"))
        async with backend.units() as uow:
            assert await uow.devices.count_enabled("tenant-a", "site-1") == 2
            assert await uow.devices.count_enabled("tenant-a", "site-2") == 1
            assert await uow.devices.count_enabled("tenant-b", "site-1") == 0

    async def test_an_update_is_a_new_version_and_a_new_source_replaces_any_stored_form(
        self, backend: Backend
    ) -> None:
        device_id = await register(backend)
        async with backend.units() as uow:
            kept = await uow.devices.update(
                device_id, DeviceUpdate(name="renamed", source_uri_ciphertext=None, desired_state="disabled")
            )
            assert await uow.devices.stored_source(device_id) == StoredSource(b"sealed", None)
        assert (kept.name, kept.desired_state, kept.media_server_id, kept.config_version) == (
            "renamed",
            "disabled",
            "default",
            2,
        )
        assert kept.updated_at >= kept.created_at
        await backend.store_cleartext_source(device_id, "rtsp://legacy/1")
        async with backend.units() as uow:
            assert await uow.devices.stored_source(device_id) == StoredSource(None, "rtsp://legacy/1")
            moved = await uow.devices.update(
                device_id,
                DeviceUpdate(
                    name="renamed",
                    source_uri_ciphertext=b"sealed-2",
                    desired_state="disabled",
                    media_server_id="mtx-b",
                ),
            )
            assert await uow.devices.stored_source(device_id) == StoredSource(b"sealed-2", None)
        assert (moved.media_server_id, moved.config_version) == ("mtx-b", 3)

    async def test_due_rows_start_at_generation_1_and_each_change_is_a_new_generation(
        self, backend: Backend
    ) -> None:
        device_id = await register(backend, partition=7)
        async with backend.units() as uow:
            state = await uow.devices.reconcile_state(device_id)
            assert state is not None
            assert (state.desired_generation, state.observed_generation, state.status) == (1, 0, "pending")
            assert (state.attempts, state.last_error_code, state.last_result_at) == (0, None, None)
            assert (state.partition, state.media_server_id) == (7, "default")
            await uow.devices.mark_due(device_id, "mtx-b")
        async with backend.units() as uow:
            again = await uow.devices.reconcile_state(device_id)
            assert again is not None
            assert (again.desired_generation, again.status, again.attempts, again.media_server_id) == (
                2,
                "pending",
                0,
                "mtx-b",
            )
            assert again.next_attempt_at >= state.next_attempt_at
            assert await uow.devices.reconcile_state(uuid.uuid4()) is None

    async def test_many_states_come_in_device_id_order_without_unknown_ids(self, backend: Backend) -> None:
        ids = [await register(backend) for _ in range(3)]
        async with backend.units() as uow:
            states = await uow.devices.reconcile_states([*reversed(ids), uuid.uuid4()])
        assert [s.device_id for s in states] == sorted(ids)

    async def test_a_fact_is_stamped_at_whole_milliseconds(self, backend: Backend) -> None:
        device_id = await register(backend)
        before = datetime.now(UTC)
        async with backend.units() as uow:
            device = await uow.devices.get(device_id)
            assert device is not None
            fact = AuditFact(uuid.uuid4(), "device.created", "operator:alice", device, ["name"])
            occurred_at = await uow.devices.insert_fact(fact)
        assert occurred_at.microsecond % 1000 == 0
        assert abs((occurred_at - before).total_seconds()) < 5

    async def test_a_site_is_created_once_with_the_default_limit_on_the_given_server(
        self, backend: Backend
    ) -> None:
        async with backend.units() as uow:
            assert await uow.sites.get("tenant-a", "site-1") is None
            created = await uow.sites.lock("tenant-a", "site-1", new_site_server="mtx-a")
            again = await uow.sites.lock("tenant-a", "site-1", new_site_server="mtx-b")
        default = limits.SITE_MAX_VIDEO_CHANNELS_DEFAULT
        assert created == again == SiteRow("tenant-a", "site-1", default, "mtx-a")
        async with backend.units() as uow:
            await uow.sites.set_limit("tenant-a", "site-1", 128)
            await uow.sites.set_server("tenant-a", "site-1", "mtx-b")
        async with backend.units() as uow:
            assert await uow.sites.get("tenant-a", "site-1") == SiteRow("tenant-a", "site-1", 128, "mtx-b")
            assert await uow.sites.get("tenant-a", "site-2") is None

    async def test_a_failed_unit_of_work_leaves_no_trace(self, backend: Backend) -> None:
        kept = await register(backend)
        lost = new_device(site_id="site-2")
        with pytest.raises(Failure):
            await write_everything_then_fail(backend, kept, lost)
        async with backend.units() as uow:
            assert await uow.sites.get("tenant-a", "site-2") is None
            assert await uow.devices.get(lost.id) is None
            state = await uow.devices.reconcile_state(kept)
            row = await uow.devices.get(kept)
        assert state is not None and (state.desired_generation, state.media_server_id) == (1, "default")
        assert row is not None and (row.name, row.config_version) == ("cam", 1)
        assert await backend.committed_event_types() == []
        store = backend.audit_push_store("reader", lease_seconds=5)
        assert await store.pending() == 0

    async def test_a_committed_unit_of_work_publishes_its_events(self, backend: Backend) -> None:
        async with backend.units() as uow:
            await uow.outbox.enqueue(announcement())
        assert await backend.committed_event_types() == ["DeviceRegistered"]


class TestPostgresDeviceStore(DeviceStoreContract):
    @pytest.fixture
    def backend(self, postgres_backend: Backend) -> Backend:
        return postgres_backend


class TestMemoryDeviceStore(DeviceStoreContract):
    @pytest.fixture
    def backend(self, memory_backend: Backend) -> Backend:
        return memory_backend
