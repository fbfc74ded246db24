"""The fenced reconcile loop on real PostgreSQL and the real MediaMTX."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client import CollectorRegistry

from sense_reconciler.adapters.mediamtx import MediaMtxClient
from sense_reconciler.adapters.unit_of_work import PostgresSenseUnitOfWork, postgres_units
from sense_reconciler.domain.model import DesiredState
from sense_reconciler.domain.reconcile import ClaimedItem, PathConfig, WorkItem
from sense_reconciler.domain.records import DeviceRow
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.metrics import ReconcileItemResult
from sense_reconciler.service_layer.ports import UnitOfWorkFactory
from sense_reconciler.service_layer.reconcile_item import _LeaseClock
from sense_reconciler.service_layer.reconciler import Reconciler
from sense_reconciler.service_layer.source_uris import SourceUris
from tests.support.sense_backends import wait_for
from tests.support.sense_devices import CAMERA_SECRET
from tests.support.sense_devices import new_device as sense_device
from tests.support.sense_reconcilers import reconciler_on
from tests.support.stack import MigratedSchema, Stack
from yovision_platform.errors import LeaseLost
from yovision_platform.mediamtx import SINGLE_MEDIA_SERVER_ID, MediaFleet
from yovision_platform.messaging import AvroSerde
from yovision_platform.observability import render_latest
from yovision_platform.storage import Identifier, Lease

ALL_PARTITIONS = range(12)
SECRET = CAMERA_SECRET
SERVER = SINGLE_MEDIA_SERVER_ID


def stack_auth(stack: Stack) -> httpx.BasicAuth | None:
    """The local stack's MediaMTX API credentials (None while it runs without them)."""
    credentials = stack.mediamtx_credentials()
    if credentials is None:
        return None
    return httpx.BasicAuth(credentials.user, credentials.password.get_secret_value())


def media_servers(mediamtx: MediaMtxClient | MediaFleet[MediaMtxClient]) -> tuple[str, ...]:
    return mediamtx.ids if isinstance(mediamtx, MediaFleet) else (SERVER,)


class CountingMediaMtx(MediaMtxClient):
    """The real client, counting the calls it sends to the real MediaMTX."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self.calls = 0

    async def _call(
        self, method: str, url: str, *, allow_404: bool = False, **kwargs: object
    ) -> httpx.Response:
        self.calls += 1
        return await super()._call(method, url, allow_404=allow_404, **kwargs)


@pytest.fixture
async def mediamtx(stack: Stack) -> AsyncIterator[CountingMediaMtx]:
    client = CountingMediaMtx(stack.mediamtx_api_url, deadline_seconds=2.0)
    client._http.auth = stack_auth(stack)
    yield client
    await client.aclose()


@dataclass
class Rig:
    """One test's real store, device service and MediaMTX, and the reconcilers built on them; the paths of
    devices made with `configured=True` are deleted from MediaMTX afterwards."""

    pool: asyncpg.Pool
    schema: MigratedSchema
    devices: Devices
    mediamtx: CountingMediaMtx
    serde: AvroSerde
    sources: SourceUris
    paths: list[str]

    @property
    def units(self) -> UnitOfWorkFactory:
        return postgres_units(self.pool, self.schema.name)

    def worker(
        self, mediamtx: MediaMtxClient | MediaFleet[MediaMtxClient] | None = None, **options: Any
    ) -> Reconciler:
        fleet = mediamtx or self.mediamtx
        return reconciler(self.pool, self.schema, fleet, self.serde, self.sources, **options)

    async def device(self, *, site: str = "site-1", configured: bool = True) -> DeviceRow:
        return await new_device(self.devices, self.paths if configured else [], site=site)

    async def lease_expired(self, device_id: uuid.UUID) -> bool:
        """The device's lease has run out by the database's clock."""
        return bool(
            await self.pool.fetchval(
                f"SELECT lease_expires_at <= now() FROM {self.schema.name.quoted}.reconcile_state "
                "WHERE device_id = $1",
                device_id,
            )
        )


@pytest.fixture
async def rig(
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    devices: Devices,
    mediamtx: CountingMediaMtx,
    serde: AvroSerde,
    sources: SourceUris,
) -> AsyncIterator[Rig]:
    made = Rig(sense_pool, sense_schema, devices, mediamtx, serde, sources, [])
    yield made
    for name in made.paths:
        await mediamtx.delete_path(name)


def reconciler(
    pool: asyncpg.Pool,
    schema: MigratedSchema,
    mediamtx: MediaMtxClient | MediaFleet[MediaMtxClient],
    serde: AvroSerde,
    sources: SourceUris,
    **options: Any,
) -> Reconciler:
    """`options`: those of `tests.support.sense_reconcilers.reconciler_on`; the metrics name every server of
    the fleet."""
    fleet = mediamtx if isinstance(mediamtx, MediaFleet) else MediaFleet({SERVER: mediamtx})
    return reconciler_on(postgres_units(pool, schema.name), fleet, serde, sources, **options)


async def new_device(devices: Devices, paths: list[str], *, site: str = "site-1") -> DeviceRow:
    device = await sense_device(devices, site=site)
    paths.append(device.path_name)
    return device


async def test_enable_configures_the_path_and_disable_deletes_exactly_it(rig: Rig) -> None:
    one = await rig.device()
    two = await rig.device()
    worker = rig.worker()
    assert await worker.run_once() == 2
    assert await rig.mediamtx.get_path(one.path_name) == PathConfig(
        f"rtsp://admin:{SECRET}@127.0.0.1:1/{one.path_name}"
    )
    status = await rig.devices.reconcile_status(one.id)
    assert (status.status, status.observed_generation) == ("converged", 1)
    owners = await rig.pool.fetch(
        f'SELECT device_id, path_name FROM "{rig.schema.name}".media_path_ownership'
    )
    assert {(r["device_id"], r["path_name"]) for r in owners} == {
        (one.id, one.path_name),
        (two.id, two.path_name),
    }
    events = await rig.pool.fetch(
        f"SELECT message_key FROM \"{rig.schema.name}\".outbox WHERE event_type = 'PathOwnershipRecorded'"
    )
    assert {bytes(r["message_key"]) for r in events} == {one.path_name.encode(), two.path_name.encode()}

    await rig.devices.change_config(one.id, name=None, source_uri="rtsp://127.0.0.1:1/changed", actor="op")
    assert await worker.run_once() == 1
    assert await rig.mediamtx.get_path(one.path_name) == PathConfig("rtsp://127.0.0.1:1/changed")

    await rig.devices.set_desired_state(one.id, DesiredState.DISABLED, actor="op")
    assert await worker.run_once() == 1
    assert await rig.mediamtx.get_path(one.path_name) is None
    assert await rig.mediamtx.get_path(two.path_name) is not None
    assert (await rig.devices.reconcile_status(one.id)).status == "converged"
    assert await rig.mediamtx.delete_path(one.path_name) is False  # a second delete is a no-op
    assert await worker.run_once() == 0


async def test_a_new_source_is_one_replace_that_also_creates_a_path_gone_from_mediamtx(rig: Rig) -> None:
    """The real MediaMTX's replace creates a missing path: after a source change no read is needed first."""
    device = await rig.device()
    worker = rig.worker()
    assert await worker.run_once() == 1
    assert await rig.mediamtx.delete_path(device.path_name) is True  # behind Sense's back
    await rig.devices.change_config(device.id, name=None, source_uri="rtsp://127.0.0.1:1/new", actor="op")
    calls = rig.mediamtx.calls
    assert await worker.run_once() == 1
    assert rig.mediamtx.calls == calls + 1, "one replace, no read first"
    assert await rig.mediamtx.get_path(device.path_name) == PathConfig("rtsp://127.0.0.1:1/new")
    assert (await rig.devices.reconcile_status(device.id)).status == "converged"


class CommitHeld(PostgresSenseUnitOfWork):
    """A unit of work that, its work done, waits for `commit` before it commits (its row locks held)."""

    def __init__(
        self, pool: asyncpg.Pool, schema: Identifier, done: asyncio.Event, commit: asyncio.Event
    ) -> None:
        super().__init__(pool, schema)
        self._done, self._commit = done, commit

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self._done.set()
            await self._commit.wait()
        await super().__aexit__(exc_type, exc, tb)


async def test_a_change_committed_while_an_item_loads_is_worked_whole_in_a_later_round(rig: Rig) -> None:
    """A device is disabled, its item claimed; it is enabled again, and that change commits while the
    item's renew-and-load waits for the row the change holds. The item works the disable it loaded and
    stays due; the next round enables: the path exists and the device converges on the last generation."""
    device = await rig.device()
    worker = rig.worker()
    assert await worker.run_once() == 1
    await rig.devices.set_desired_state(device.id, DesiredState.DISABLED, actor="op")
    units = rig.units
    async with units() as uow:
        [item] = await uow.reconcile.claim(
            "inst-a", list(ALL_PARTITIONS), media_server=SERVER, lease_seconds=30, limit=1
        )
    done, commit = asyncio.Event(), asyncio.Event()
    held = Devices(
        lambda: CommitHeld(rig.pool, rig.schema.name, done, commit),
        rig.serde,
        device_topic="sense.device.v1",
        partitions=len(ALL_PARTITIONS),
        sources=rig.sources,
    )
    enabling = asyncio.create_task(held.set_desired_state(device.id, DesiredState.ENABLED, actor="op"))
    await asyncio.wait_for(done.wait(), timeout=10)
    working = asyncio.create_task(worker._items.process(item))

    async def load_waits_for_the_change() -> bool:
        waiting: int = await rig.pool.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0",
            f'"{rig.schema.name}".reconcile_state',
        )
        return waiting == 1

    await wait_for(load_waits_for_the_change)
    commit.set()
    await enabling
    assert await working is ReconcileItemResult.CONVERGED
    status = await rig.devices.reconcile_status(device.id)
    assert (status.status, status.observed_generation, status.desired_generation) == ("pending", 2, 3)
    assert await worker.run_once() == 1
    assert await rig.mediamtx.get_path(device.path_name) == PathConfig(
        f"rtsp://admin:{SECRET}@127.0.0.1:1/{device.path_name}"
    )
    status = await rig.devices.reconcile_status(device.id)
    assert (status.status, status.observed_generation) == ("converged", 3)


async def test_failure_persists_backoff_and_a_stable_code(stack: Stack, rig: Rig) -> None:
    device = await rig.device(configured=False)
    unreachable = MediaMtxClient("http://127.0.0.1:9", deadline_seconds=1.0)
    worker = rig.worker(unreachable)
    assert await worker.run_once() == 1
    status = await rig.devices.reconcile_status(device.id)
    assert (status.status, status.attempts, status.last_error_code) == (
        "failed",
        1,
        "mediamtx_unreachable",
    )
    delay = await rig.pool.fetchval(
        "SELECT extract(epoch FROM next_attempt_at - last_result_at) "
        f'FROM "{rig.schema.name}".reconcile_state'
    )
    assert 0.9 <= float(delay) <= 1.1
    assert await worker.run_once() == 0  # not due before the backoff ends
    await unreachable.aclose()


async def test_only_owned_partitions_are_claimed(rig: Rig) -> None:
    device = await rig.device(configured=False)
    partition = rig.devices.partition_of(device.id)
    client = MediaMtxClient("http://127.0.0.1:9", deadline_seconds=1.0)
    assert await rig.worker(client, partitions=range(0)).run_once() == 0
    not_mine = [p for p in ALL_PARTITIONS if p != partition]
    async with rig.units() as uow:
        store = uow.reconcile
        assert await store.claim("x", not_mine, media_server=SERVER, lease_seconds=5, limit=128) == []
        assert len(await store.claim("x", [partition], media_server=SERVER, lease_seconds=5, limit=128)) == 1
    await client.aclose()


async def test_two_stores_claiming_concurrently_claim_every_row_once(rig: Rig) -> None:
    for n in range(40):
        await rig.device(site=f"site-{n // 10}", configured=False)

    async def claim(owner: str) -> list[uuid.UUID]:
        async with rig.units() as uow:
            batch = await uow.reconcile.claim(
                owner, list(ALL_PARTITIONS), media_server=SERVER, lease_seconds=30, limit=3
            )
        return [item.device_id for item in batch]

    async def claim_all(owner: str) -> list[uuid.UUID]:
        got: list[uuid.UUID] = []
        while batch := await claim(owner):
            got += batch
        return got

    first, second = await asyncio.gather(claim_all("a"), claim_all("b"))
    assert len(first) + len(second) == 40
    assert len(set(first) | set(second)) == 40


async def test_a_stale_worker_cannot_complete_or_touch_mediamtx_after_takeover(rig: Rig) -> None:
    device = await rig.device()
    units = rig.units
    async with units() as uow:
        [stale] = await uow.reconcile.claim(
            "stale", list(ALL_PARTITIONS), media_server=SERVER, lease_seconds=0.5, limit=1
        )
    async with units() as uow:
        work = await uow.reconcile.renew_and_load(stale, lease_seconds=0.5)
    # the stale lease expires (by the database's clock); a successor takes over and converges the device
    await wait_for(lambda: rig.lease_expired(device.id), timeout_seconds=5)
    successor = rig.worker(owner="successor")
    assert await successor.run_once() == 1
    calls = rig.mediamtx.calls
    async with units() as uow:
        with pytest.raises(LeaseLost):
            await uow.reconcile.renew_and_load(stale, lease_seconds=30)
        with pytest.raises(LeaseLost):
            await uow.reconcile.complete(work, work.lease)
        with pytest.raises(LeaseLost):
            await uow.reconcile.fail(stale, work.lease, error_code="x", retry_in_seconds=1)
    # A worker whose renewal fails records lease_lost and calls nothing.
    registry = CollectorRegistry()
    late = rig.worker(owner="late", registry=registry)
    assert await late._one(stale, SERVER, stopping=False) is ReconcileItemResult.LEASE_LOST
    assert rig.mediamtx.calls == calls
    assert (await rig.devices.reconcile_status(device.id)).status == "converged"


class FakeMonotonic:
    """A monotonic clock the test moves: a pause of the process, without waiting for it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def test_a_paused_worker_makes_no_call_once_its_lease_would_run_out(rig: Rig) -> None:
    """Before a call the time since the last renewal leaves no room for, the lease is renewed (fenced, on the
    real store): a worker paused past its lease, or whose renewal is refused or takes the margin itself,
    makes no MediaMTX call; one whose renewal comes back in time makes it."""
    device = await rig.device(configured=False)  # never configured: the only call made is a read
    units = rig.units
    lease_seconds, deadline_seconds, past_the_margin = 1.0, 0.5, 0.6

    async def claimed() -> tuple[ClaimedItem, WorkItem]:
        async with units() as uow:
            [item] = await uow.reconcile.claim(
                "a", list(ALL_PARTITIONS), media_server=SERVER, lease_seconds=lease_seconds, limit=1
            )
        async with units() as uow:
            return item, await uow.reconcile.renew_and_load(item, lease_seconds=lease_seconds)

    def renewal(work: WorkItem) -> Callable[[Lease], Awaitable[Lease]]:
        async def renew(lease: Lease) -> Lease:
            async with units() as uow:
                return await uow.reconcile.renew(work, lease, lease_seconds=lease_seconds)

        return renew

    def read(clock: _LeaseClock) -> Awaitable[PathConfig | None]:
        return clock.call(lambda: rig.mediamtx.get_path(device.path_name))

    # Paused (SIGSTOP) after the renewal and resumed once the lease had expired in the database.
    _, work = await claimed()
    clock = _LeaseClock(work.lease, lease_seconds, deadline_seconds, renewal(work))
    await wait_for(lambda: rig.lease_expired(device.id), timeout_seconds=5)
    with pytest.raises(LeaseLost):
        await read(clock)
    assert rig.mediamtx.calls == 0

    # Waited for the server's lane past the margin, and the lease is no longer ours: the renewal is refused.
    item, work = await claimed()
    now = FakeMonotonic()
    clock = _LeaseClock(work.lease, lease_seconds, deadline_seconds, renewal(work), now)
    async with units() as uow:
        await uow.reconcile.release(item)
    now.advance(past_the_margin)
    with pytest.raises(LeaseLost):
        await read(clock)
    assert rig.mediamtx.calls == 0

    # Paused during the renewal: renewed, but the margin is gone by the time it came back.
    _, work = await claimed()
    now = FakeMonotonic()
    renew = renewal(work)

    async def paused_during_the_renewal(lease: Lease) -> Lease:
        renewed = await renew(lease)
        now.advance(past_the_margin)
        return renewed

    clock = _LeaseClock(work.lease, lease_seconds, deadline_seconds, paused_during_the_renewal, now)
    now.advance(past_the_margin)
    with pytest.raises(LeaseLost):
        await read(clock)
    assert rig.mediamtx.calls == 0

    # Renewed in time: the call is made under the longer lease.
    now = FakeMonotonic()
    clock = _LeaseClock(clock.lease, lease_seconds, deadline_seconds, renew, now)
    before = clock.lease
    now.advance(past_the_margin)
    assert await read(clock) is None
    assert rig.mediamtx.calls == 1
    assert clock.lease.token == work.lease.token and clock.lease.expires_at > before.expires_at


async def test_metrics_carry_only_enum_labels(rig: Rig) -> None:
    device = await rig.device()
    registry = CollectorRegistry()
    await rig.worker(registry=registry).run_once()
    text = render_latest(registry)[0].decode()
    assert 'sense_reconcile_items_total{media_server="default",result="converged"} 1.0' in text
    for forbidden in (str(device.id), device.path_name, SECRET, "tenant-a", "site-1"):
        assert forbidden not in text


async def test_items_of_revoked_partitions_and_items_after_stop_are_released_untouched(rig: Rig) -> None:
    device = await rig.device(configured=False)
    registry = CollectorRegistry()
    worker = rig.worker(registry=registry)
    stop = asyncio.Event()
    stop.set()
    assert await worker.run_once(stop) == 1
    released = {"result": "released", "media_server": SERVER}
    assert registry.get_sample_value("sense_reconcile_items_total", released) == 1
    units = rig.units
    async with units() as uow:
        [claimed] = await uow.reconcile.claim(
            "x", list(ALL_PARTITIONS), media_server=SERVER, lease_seconds=30, limit=1
        )
    worker._owned.revoke([claimed.partition])
    assert await worker._one(claimed, SERVER, stopping=False) is ReconcileItemResult.RELEASED
    assert rig.mediamtx.calls == 0
    status = await rig.devices.reconcile_status(device.id)
    assert (status.status, status.attempts) == ("pending", 0)
    async with units() as uow:  # released, so claimable again at once
        claimable = await uow.reconcile.claim(
            "y", list(ALL_PARTITIONS), media_server=SERVER, lease_seconds=30, limit=1
        )
    assert len(claimable) == 1


async def test_the_drift_check_repairs_a_path_changed_behind_senses_back(rig: Rig) -> None:
    enabled = await rig.device()
    disabled = await rig.device()
    worker = rig.worker(drift_check_seconds=0.5)
    assert await worker.run_once() == 2
    await rig.devices.set_desired_state(disabled.id, DesiredState.DISABLED, actor="op")
    assert await worker.run_once() == 1
    # Results younger than the drift interval are not checked again (an hour: no test run is that slow).
    patient = rig.worker(drift_check_seconds=3600)
    assert await patient.mark_drift_checks() == 0

    # Behind Sense's back: the enabled device's path is deleted, the disabled one's path is re-created.
    await rig.mediamtx.delete_path(enabled.path_name)
    await rig.mediamtx.add_path(disabled.path_name, PathConfig("rtsp://127.0.0.1:1/hand-made"))
    assert await _marked_for_drift_check(worker, expected=2) == 2
    assert await worker.run_once() == 2
    assert await rig.mediamtx.get_path(enabled.path_name) == PathConfig(
        f"rtsp://admin:{SECRET}@127.0.0.1:1/{enabled.path_name}"
    )
    assert await rig.mediamtx.get_path(disabled.path_name) is None
    for device in (enabled, disabled):
        status = await rig.devices.reconcile_status(device.id)
        assert status.status == "converged"
        assert status.observed_generation == status.desired_generation


async def _marked_for_drift_check(worker: Reconciler, *, expected: int, within: float = 30.0) -> int:
    """Mark drift checks until `expected` devices are marked (their results outlived the interval) or
    `within` seconds pass; returns how many were marked."""
    marked = 0
    deadline = time.monotonic() + within
    while marked < expected and time.monotonic() < deadline:
        marked += await worker.mark_drift_checks()
        if marked < expected:
            await asyncio.sleep(0.05)
    return marked
