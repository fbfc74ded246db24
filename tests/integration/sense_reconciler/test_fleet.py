"""Sense with several real MediaMTX servers (private, authenticated sandboxes) and real PostgreSQL: a site
move creates paths on the new server and then deletes them exactly on the old one, whatever fails in
between; one writer per server; path names with "/" as MediaMTX takes them (the use-case rules alone:
tests/unit/sense_reconciler/test_reconciler.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client import CollectorRegistry

from sense_reconciler.adapters.mediamtx import MediaMtxClient
from sense_reconciler.adapters.unit_of_work import postgres_units
from sense_reconciler.domain import limits
from sense_reconciler.domain.model import DesiredState
from sense_reconciler.domain.reconcile import PathConfig
from sense_reconciler.domain.records import DeviceRow
from sense_reconciler.entrypoints.reconciler_worker import ReconcilerWorker
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.metrics import ReconcileMetrics
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.reconciler import Reconciler
from sense_reconciler.service_layer.source_uris import SourceUris
from tests.support.mediamtx_proxy import MediaMtxProxy
from tests.support.sense_devices import DEVICE_TOPIC_PARTITIONS
from tests.support.sense_reconciler_fixtures import devices_on
from tests.support.stack import MEDIAMTX_BIN, MigratedSchema
from yovision_platform.mediamtx import MediaFleet
from yovision_platform.messaging import AvroSerde
from yovision_platform.security import EncryptionKeyRing
from yovision_platform.tools.mediamtx_sandbox import MediaMtxSandbox, mediamtx_sandbox

SERVERS = ("mtx-a", "mtx-b")
SECRET = "fleet-cam-pw-5"


class RecordingClient(MediaMtxClient):
    """The real client; records (server, method, path) of every call and the most calls in flight."""

    def __init__(self, server: str, journal: list[tuple[str, str, str]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.server = server
        self.journal = journal
        self.in_flight = 0
        self.most_in_flight = 0

    async def _call(self, method: str, url: str, *, allow_404: bool = False, **kwargs: Any) -> httpx.Response:
        parts = url.split("/", 5)  # "", v3, config, paths, <action>, <name>
        self.journal.append((self.server, parts[4], parts[5] if len(parts) > 5 else ""))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return await super()._call(method, url, allow_404=allow_404, **kwargs)
        finally:
            self.in_flight -= 1


@pytest.fixture
async def sandboxes(tmp_path: Path) -> AsyncIterator[dict[str, MediaMtxSandbox]]:
    async with contextlib.AsyncExitStack() as stack:
        yield {
            server: await stack.enter_async_context(mediamtx_sandbox(MEDIAMTX_BIN, tmp_path, label=server))
            for server in SERVERS
        }


@pytest.fixture
def journal() -> list[tuple[str, str, str]]:
    return []


def client_of(sandbox: MediaMtxSandbox, server: str, journal: list[tuple[str, str, str]]) -> RecordingClient:
    return RecordingClient(
        server, journal, base_url=sandbox.url, deadline_seconds=2.0, credentials=sandbox.credentials
    )


@pytest.fixture
async def fleet(
    sandboxes: dict[str, MediaMtxSandbox], journal: list[tuple[str, str, str]]
) -> AsyncIterator[MediaFleet[RecordingClient]]:
    made = MediaFleet({server: client_of(sandbox, server, journal) for server, sandbox in sandboxes.items()})
    yield made
    await made.aclose()


@pytest.fixture
def fleet_devices(
    sense_pool: asyncpg.Pool, sense_schema: MigratedSchema, serde: AvroSerde, sources: SourceUris
) -> Devices:
    return devices_on(
        sense_pool,
        sense_schema,
        serde,
        sources,
        media_servers=frozenset(SERVERS),
        default_media_server="mtx-a",
    )


def reconciler_of(
    pool: asyncpg.Pool,
    schema: MigratedSchema,
    fleet: MediaFleet[MediaMtxClient],
    serde: AvroSerde,
    sources: SourceUris,
    registry: CollectorRegistry | None = None,
) -> Reconciler:
    owned = OwnedPartitions("sense.device.v1")
    owned.assign(range(DEVICE_TOPIC_PARTITIONS))
    return Reconciler(
        postgres_units(pool, schema.name),
        fleet,
        owned,
        ReconcileMetrics(registry or CollectorRegistry(), fleet.ids),
        serde,
        owner="fleet-test",
        sources=sources,
        lease_seconds=5.0,
        batch=limits.CLAIM_BATCH_MAX_ITEMS,
        drift_check_seconds=0.0,
    )


async def create(devices: Devices, path: str, *, site: str = "site-1", enabled: bool = True) -> DeviceRow:
    return await devices.create_device(
        tenant_id="tenant-a",
        site_id=site,
        name="cam",
        path_name=path,
        source_uri=f"rtsp://admin:{SECRET}@192.0.2.7/{path}",
        desired_state=DesiredState.ENABLED if enabled else DesiredState.DISABLED,
        actor="op",
    )


async def names_on(fleet: MediaFleet[RecordingClient], server: str) -> set[str]:
    return set(await fleet.client(server).list_path_names())


async def placements(pool: asyncpg.Pool, schema: MigratedSchema, device: DeviceRow) -> set[str]:
    rows = await pool.fetch(
        f'SELECT media_server_id FROM "{schema.name}".media_path_placements WHERE device_id = $1', device.id
    )
    return {r["media_server_id"] for r in rows}


async def test_a_site_move_creates_on_the_new_server_then_deletes_exactly_on_the_old(
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    fleet_devices: Devices,
    fleet: MediaFleet[RecordingClient],
    journal: list[tuple[str, str, str]],
    serde: AvroSerde,
    sources: SourceUris,
) -> None:
    moved = [await create(fleet_devices, f"site-1/cam-{n}") for n in range(3)]
    stays = await create(fleet_devices, "site-2/cam-0", site="site-2")
    worker = reconciler_of(sense_pool, sense_schema, fleet, serde, sources)
    assert await worker.run_once() == 4
    assert await names_on(fleet, "mtx-a") == {d.path_name for d in [*moved, stays]}
    assert await names_on(fleet, "mtx-b") == set()
    await fleet.client("mtx-b").add_path("site-1/cam-00", PathConfig("rtsp://192.0.2.9/hand-made"))

    site = await fleet_devices.sites.configure_site(
        "tenant-a", "site-1", max_video_channels=None, media_server_id="mtx-b", actor="op"
    )
    assert site.media_server_id == "mtx-b"
    journal.clear()
    assert await worker.run_once() == 3
    assert await names_on(fleet, "mtx-a") == {stays.path_name}
    assert await names_on(fleet, "mtx-b") == {d.path_name for d in moved} | {"site-1/cam-00"}
    for device in moved:
        calls = [(server, action) for server, action, name in journal if name == device.path_name]
        assert calls == [("mtx-b", "add"), ("mtx-a", "delete")]  # created first, then deleted exactly
        assert await placements(sense_pool, sense_schema, device) == {"mtx-b"}
        assert (await fleet_devices.reconcile_status(device.id)).status == "converged"
        assert (await fleet_devices.get_device(device.id)).media_server_id == "mtx-b"
    owners = await sense_pool.fetch(
        f'SELECT media_server_id, path_name FROM "{sense_schema.name}".media_path_ownership '
        "WHERE path_name = $1",
        moved[0].path_name,
    )
    assert {r["media_server_id"] for r in owners} == {"mtx-a", "mtx-b"}
    events = await sense_pool.fetch(
        f'SELECT event_type, value FROM "{sense_schema.name}".outbox ORDER BY id DESC LIMIT 20'
    )
    decoded = [serde.decode(bytes(r["value"])) for r in events]
    moves = [e.record for e in decoded if e.event_type == "DeviceConfigChanged"]
    assert len(moves) == 3
    assert all(m["media_server_id"] == "mtx-b" and m["changed_fields"] == ["media_server_id"] for m in moves)
    ownership = [e.record for e in decoded if e.event_type == "PathOwnershipRecorded"]
    assert {o["media_server_id"] for o in ownership[:3]} == {"mtx-b"}


async def test_a_move_whose_old_delete_fails_is_retried_and_a_move_back_leaves_nothing_behind(
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    fleet_devices: Devices,
    sandboxes: dict[str, MediaMtxSandbox],
    journal: list[tuple[str, str, str]],
    serde: AvroSerde,
    sources: SourceUris,
) -> None:
    proxy = MediaMtxProxy(sandboxes["mtx-a"].url)
    async with proxy.running():
        fleet = MediaFleet(
            {
                "mtx-a": RecordingClient(
                    "mtx-a",
                    journal,
                    base_url=proxy.url,
                    deadline_seconds=2.0,
                    credentials=sandboxes["mtx-a"].credentials,
                ),
                "mtx-b": client_of(sandboxes["mtx-b"], "mtx-b", journal),
            }
        )
        worker = reconciler_of(sense_pool, sense_schema, fleet, serde, sources)
        device = await create(fleet_devices, "lobby/cam")
        assert await worker.run_once() == 1
        proxy.refuse_deletes.add("cam")  # the old server refuses the delete of lobby/cam
        await fleet_devices.sites.configure_site(
            "tenant-a", "site-1", max_video_channels=None, media_server_id="mtx-b", actor="op"
        )
        assert await worker.run_once() == 1
        status = await fleet_devices.reconcile_status(device.id)
        assert (status.status, status.last_error_code) == ("failed", "mediamtx_http_500")
        assert await placements(sense_pool, sense_schema, device) == {"mtx-a", "mtx-b"}
        assert "lobby/cam" in await names_on(fleet, "mtx-a") and "lobby/cam" in await names_on(fleet, "mtx-b")
        # moved back before the retry: the path must end on mtx-a only, the copy on mtx-b deleted
        proxy.refuse_deletes.clear()
        await fleet_devices.sites.configure_site(
            "tenant-a", "site-1", max_video_channels=None, media_server_id="mtx-a", actor="op"
        )
        assert await worker.run_once() == 1
        assert (await fleet_devices.reconcile_status(device.id)).status == "converged"
        assert "lobby/cam" in await names_on(fleet, "mtx-a")
        assert "lobby/cam" not in await names_on(fleet, "mtx-b")
        assert await placements(sense_pool, sense_schema, device) == {"mtx-a"}
        await fleet.aclose()


async def test_disabling_deletes_the_path_on_every_server_it_was_placed_on(
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    fleet_devices: Devices,
    fleet: MediaFleet[RecordingClient],
    serde: AvroSerde,
    sources: SourceUris,
) -> None:
    device = await create(fleet_devices, "gate/cam")
    worker = reconciler_of(sense_pool, sense_schema, fleet, serde, sources)
    assert await worker.run_once() == 1
    await fleet_devices.set_desired_state(device.id, DesiredState.DISABLED, actor="op")
    assert await worker.run_once() == 1
    assert "gate/cam" not in await names_on(fleet, "mtx-a")
    assert await placements(sense_pool, sense_schema, device) == set()
    # a disabled device never configured anywhere: one exact delete on its server, a 404, converged
    never = await create(fleet_devices, "never/cam", enabled=False)
    assert await worker.run_once() == 1
    assert (await fleet_devices.reconcile_status(never.id)).status == "converged"


@pytest.mark.parametrize(
    "path",
    [
        "site-1/cam-07",
        "Site_1/lobby.cam-2/main",
        "a/.../b",
        "_x/-y",
        "s" * (limits.PATH_NAME_MAX_CHARS - 4) + "/cam",
    ],
)
async def test_slash_names_and_the_maximum_length_round_trip_through_the_real_mediamtx(
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    fleet_devices: Devices,
    fleet: MediaFleet[RecordingClient],
    serde: AvroSerde,
    sources: SourceUris,
    path: str,
) -> None:
    assert len(path) <= limits.PATH_NAME_MAX_CHARS
    sibling = path[:-1] + ("y" if path[-1] != "y" else "z")
    neighbours = {sibling, path.rpartition("/")[0]}  # a name that differs at the end, the parent: untouched
    for name in neighbours:
        await fleet.client("mtx-a").add_path(name, PathConfig("rtsp://192.0.2.9/hand-made"))
    device = await create(fleet_devices, path)
    worker = reconciler_of(sense_pool, sense_schema, fleet, serde, sources)
    assert await worker.run_once() == 1
    client = fleet.client("mtx-a")
    assert await client.get_path(path) == PathConfig(f"rtsp://admin:{SECRET}@192.0.2.7/{path}")
    assert await names_on(fleet, "mtx-a") == {path} | neighbours
    await fleet_devices.set_desired_state(device.id, DesiredState.DISABLED, actor="op")
    assert await worker.run_once() == 1
    assert await names_on(fleet, "mtx-a") == neighbours


async def test_each_server_gets_one_call_at_a_time_and_no_failure_of_our_own(
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    fleet_devices: Devices,
    fleet: MediaFleet[RecordingClient],
    serde: AvroSerde,
    sources: SourceUris,
) -> None:
    await fleet_devices.sites.configure_site(
        "tenant-a", "site-b", max_video_channels=None, media_server_id="mtx-b", actor="op"
    )
    devices = [await create(fleet_devices, f"a/cam-{n}", site=f"site-a{n // 16}") for n in range(20)]
    devices += [await create(fleet_devices, f"b/cam-{n}", site="site-b") for n in range(12)]
    registry = CollectorRegistry()
    worker = reconciler_of(sense_pool, sense_schema, fleet, serde, sources, registry)
    stop = asyncio.Event()
    task = asyncio.create_task(ReconcilerWorker(worker).run(stop))
    try:
        for _ in range(600):
            statuses = [await fleet_devices.reconcile_status(d.id) for d in devices]
            if all(s.status == "converged" for s in statuses):
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert all(s.status == "converged" and s.attempts == 0 for s in statuses)
    for server in SERVERS:
        assert fleet.client(server).most_in_flight == 1
        failed = registry.get_sample_value(
            "sense_reconcile_items_total", {"result": "failed", "media_server": server}
        )
        assert failed == 0
    assert len(await names_on(fleet, "mtx-a")) == 20 and len(await names_on(fleet, "mtx-b")) == 12


async def test_source_uris_are_encrypted_at_rest_and_an_unreadable_one_makes_no_call(
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    fleet_devices: Devices,
    fleet: MediaFleet[RecordingClient],
    journal: list[tuple[str, str, str]],
    serde: AvroSerde,
) -> None:
    device = await create(fleet_devices, "vault/cam")
    row = await sense_pool.fetchrow(
        f'SELECT source_uri, source_uri_ciphertext FROM "{sense_schema.name}".devices WHERE id = $1',
        device.id,
    )
    assert row["source_uri"] is None and SECRET.encode() not in bytes(row["source_uri_ciphertext"])
    # a reconciler whose ring lacks the key the URI was sealed with: a stable code, no MediaMTX call
    other = SourceUris(EncryptionKeyRing({"k9": os.urandom(32)}, "k9"))
    assert await reconciler_of(sense_pool, sense_schema, fleet, serde, other).run_once() == 1
    status = await fleet_devices.reconcile_status(device.id)
    assert (status.status, status.last_error_code) == ("failed", "secret_key_unknown")
    assert journal == []
