"""The reconcile use cases on the fakes: what reaches MediaMTX for each device change, the persisted backoff,
fencing, site moves across servers, drift repair and start-up limits."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from sense_reconciler.adapters.memory import MemoryMediaMtx, MemorySense
from sense_reconciler.domain import limits
from sense_reconciler.domain.model import DesiredState
from sense_reconciler.domain.reconcile import PathConfig
from sense_reconciler.domain.records import DeviceRow
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.metrics import ReconcileItemResult, ReconcileMetrics
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.reconciler import Reconciler
from sense_reconciler.service_layer.source_uris import SourceUris
from tests.support.sense_devices import CAMERA_SECRET, new_device
from tests.support.sense_reconcilers import reconciler_on
from tests.unit.sense_reconciler.conftest import ManualClock, device_service
from yovision_platform.errors import ConfigError
from yovision_platform.mediamtx import MediaFleet, MediaMtxError
from yovision_platform.messaging import AvroSerde
from yovision_platform.observability import render_latest
from yovision_platform.security import EncryptionKeyRing

SECRET = CAMERA_SECRET
ALL_PARTITIONS = range(12)


class JournaledMediaMtx(MemoryMediaMtx):
    """A fake server that also writes (server, action, path name) of each call to a shared journal."""

    def __init__(self, server: str, journal: list[tuple[str, str, str]]) -> None:
        super().__init__(deadline_seconds=1.0)
        self.server = server
        self.journal = journal

    def _call(self, action: str, name: str) -> None:
        self.journal.append((self.server, action, name))
        super()._call(action, name)


def fleet_of(
    *servers: str, journal: list[tuple[str, str, str]] | None = None
) -> MediaFleet[JournaledMediaMtx]:
    shared = [] if journal is None else journal
    return MediaFleet({server: JournaledMediaMtx(server, shared) for server in servers})


def reconciler(
    sense: MemorySense,
    fleet: MediaFleet[MemoryMediaMtx],
    serde: AvroSerde,
    sources: SourceUris,
    **options: Any,
) -> Reconciler:
    """`options`: those of `tests.support.sense_reconcilers.reconciler_on` (owner, lease, partitions...)."""
    return reconciler_on(sense.units(), fleet, serde, sources, **options)


def source_of(device: DeviceRow) -> PathConfig:
    return PathConfig(f"rtsp://admin:{SECRET}@127.0.0.1:1/{device.path_name}")


async def test_enable_configures_the_path_and_disable_deletes_exactly_it(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris
) -> None:
    fleet = fleet_of("default")
    mediamtx = fleet.client("default")
    one, two = await new_device(devices), await new_device(devices)
    worker = reconciler(sense, fleet, serde, sources)
    assert await worker.run_once() == 2
    assert mediamtx.paths == {one.path_name: source_of(one), two.path_name: source_of(two)}
    assert [action for action, _ in mediamtx.calls] == ["add", "add"], "never configured: added at once"
    status = await devices.reconcile_status(one.id)
    assert (status.status, status.observed_generation) == ("converged", 1)
    assert {(d, p) for d, _, p in sense.state.ownership} == {(one.id, one.path_name), (two.id, two.path_name)}
    events = [m for m in sense.outbox.committed if m.event_type == "PathOwnershipRecorded"]
    assert {m.key for m in events} == {one.path_name.encode(), two.path_name.encode()}

    await devices.change_config(one.id, name=None, source_uri="rtsp://127.0.0.1:1/changed", actor="op")
    mediamtx.calls.clear()
    assert await worker.run_once() == 1
    assert mediamtx.paths[one.path_name] == PathConfig("rtsp://127.0.0.1:1/changed")
    assert mediamtx.calls == [("replace", one.path_name)], "a new source differs: replaced, no read first"

    await devices.set_desired_state(one.id, DesiredState.DISABLED, actor="op")
    mediamtx.calls.clear()
    assert await worker.run_once() == 1
    assert mediamtx.calls == [("delete", one.path_name)]
    assert set(mediamtx.paths) == {two.path_name}
    assert (await devices.reconcile_status(one.id)).status == "converged"
    assert await worker.run_once() == 0


async def test_an_unchanged_path_is_left_alone(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris
) -> None:
    fleet = fleet_of("default")
    device = await new_device(devices)
    worker = reconciler(sense, fleet, serde, sources)
    assert await worker.run_once() == 1
    await devices.change_config(device.id, name="renamed", source_uri=None, actor="op")
    fleet.client("default").calls.clear()
    assert await worker.run_once() == 1
    assert fleet.client("default").calls == [("get", device.path_name)]


async def test_a_new_source_is_replaced_at_once_until_a_completion_observes_it(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris, clock: ManualClock
) -> None:
    fleet = fleet_of("default")
    mediamtx = fleet.client("default")
    device = await new_device(devices)
    worker = reconciler(sense, fleet, serde, sources, drift_check_seconds=0.5)
    assert await worker.run_once() == 1
    del mediamtx.paths[device.path_name]  # behind Sense's back: a replace creates it again
    mediamtx.failures.append("mediamtx_unreachable")
    await devices.change_config(device.id, name=None, source_uri="rtsp://127.0.0.1:1/new", actor="op")
    mediamtx.calls.clear()
    assert await worker.run_once() == 1
    clock.advance(1.0)  # the backoff
    assert await worker.run_once() == 1
    assert mediamtx.calls == [("replace", device.path_name)] * 2, "the retry still knows the source changed"
    assert mediamtx.paths[device.path_name] == PathConfig("rtsp://127.0.0.1:1/new")
    assert (await devices.reconcile_status(device.id)).status == "converged"

    clock.advance(0.6)  # a drift check after the change was observed: read first, nothing to change
    assert await worker.mark_drift_checks() == 1
    mediamtx.calls.clear()
    assert await worker.run_once() == 1
    assert mediamtx.calls == [("get", device.path_name)]


async def test_a_writer_works_the_next_items_database_work_while_its_server_answers_one_call_at_a_time(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris
) -> None:
    class GatedMediaMtx(JournaledMediaMtx):
        """Holds every add until the test opens the gate; counts the calls in flight at once."""

        def __init__(self, journal: list[tuple[str, str, str]]) -> None:
            super().__init__("default", journal)
            self.gate = asyncio.Event()
            self.in_flight = self.most_in_flight = 0

        async def add_path(self, name: str, config: PathConfig) -> None:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                await self.gate.wait()
                await super().add_path(name, config)
            finally:
                self.in_flight -= 1

    mediamtx = GatedMediaMtx([])
    fleet = MediaFleet({"default": mediamtx})
    created = [await new_device(devices) for _ in range(limits.ITEMS_IN_FLIGHT_PER_WRITER + 1)]
    round_ = asyncio.create_task(reconciler(sense, fleet, serde, sources).run_once())
    placed = {d.id for d in created}

    def loaded() -> int:
        """Items renewed and loaded so far (each renewal places its enabled device on its server)."""
        return len({device_id for device_id, _ in sense.state.placements if device_id in placed})

    async def loaded_while_the_first_call_is_held() -> None:
        # The fake's state has nothing to wait on: yield until the placements appear (bounded below).
        while loaded() < 2:  # noqa: ASYNC110
            await asyncio.sleep(0)

    await asyncio.wait_for(loaded_while_the_first_call_is_held(), 5)
    assert mediamtx.in_flight == 1, "the next item was renewed and loaded; its call waits its turn"
    assert loaded() <= limits.ITEMS_IN_FLIGHT_PER_WRITER, "no more items in flight than the limit"
    mediamtx.gate.set()
    assert await asyncio.wait_for(round_, 5) == len(created)
    assert mediamtx.most_in_flight == 1, "one call at a time per server"
    assert set(mediamtx.paths) == {d.path_name for d in created}


async def test_a_failure_persists_its_backoff_and_a_stable_code(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris, clock: ManualClock
) -> None:
    fleet = fleet_of("default")
    fleet.client("default").failures.extend(["mediamtx_unreachable", "mediamtx_unreachable"])
    device = await new_device(devices)
    worker = reconciler(sense, fleet, serde, sources)
    assert await worker.run_once() == 1
    status = await devices.reconcile_status(device.id)
    assert (status.status, status.attempts, status.last_error_code) == ("failed", 1, "mediamtx_unreachable")
    assert status.last_result_at is not None
    assert (status.next_attempt_at - status.last_result_at).total_seconds() == 1.0
    assert await worker.run_once() == 0, "not due before the backoff ends"
    clock.advance(1.0)
    assert await worker.run_once() == 1
    status = await devices.reconcile_status(device.id)
    assert status.attempts == 2 and status.last_result_at is not None
    assert (status.next_attempt_at - status.last_result_at).total_seconds() == 2.0, "1 s doubling"
    clock.advance(2.0)
    assert await worker.run_once() == 1
    converged = await devices.reconcile_status(device.id)
    assert (converged.status, converged.attempts, converged.last_error_code) == ("converged", 0, None)


async def test_only_owned_partitions_are_claimed(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris
) -> None:
    device = await new_device(devices)
    partition = devices.partition_of(device.id)
    fleet = fleet_of("default")
    assert await reconciler(sense, fleet, serde, sources, partitions=range(0)).run_once() == 0
    for other in (p for p in ALL_PARTITIONS if p != partition):
        assert (
            await reconciler(sense, fleet, serde, sources, partitions=range(other, other + 1)).run_once() == 0
        )
    mine = range(partition, partition + 1)
    assert await reconciler(sense, fleet, serde, sources, partitions=mine).run_once() == 1
    assert fleet.client("default").calls == [("add", device.path_name)]


async def test_a_path_that_already_exists_is_adopted_not_failed(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris
) -> None:
    fleet = fleet_of("default")
    mediamtx = fleet.client("default")
    mediamtx.paths["hall/cam"] = PathConfig("rtsp://192.0.2.9/left-over")
    device = await new_device(devices, "hall/cam")
    assert await reconciler(sense, fleet, serde, sources).run_once() == 1
    assert [action for action, _ in mediamtx.calls] == ["add", "get", "replace"]
    status = await devices.reconcile_status(device.id)
    assert (status.status, status.attempts) == ("converged", 0)
    assert mediamtx.paths["hall/cam"] == source_of(device)


async def test_a_stale_worker_calls_nothing_and_cannot_record_after_a_takeover(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris, clock: ManualClock
) -> None:
    device = await new_device(devices)
    fleet = fleet_of("default")
    async with sense.unit() as uow:
        [stale] = await uow.reconcile.claim(
            "stale", list(ALL_PARTITIONS), media_server="default", lease_seconds=0.5, limit=1
        )
    clock.advance(0.6)  # the stale lease expires; a successor takes over and converges the device
    assert await reconciler(sense, fleet, serde, sources, owner="successor").run_once() == 1
    calls = list(fleet.client("default").calls)
    registry = CollectorRegistry()
    late = reconciler(sense, fleet, serde, sources, owner="late", registry=registry)
    assert await late._one(stale, "default", stopping=False) is ReconcileItemResult.LEASE_LOST
    assert fleet.client("default").calls == calls
    assert (await devices.reconcile_status(device.id)).status == "converged"


async def test_items_of_revoked_partitions_and_items_after_stop_are_released_untouched(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris
) -> None:
    device = await new_device(devices)
    fleet = fleet_of("default")
    registry = CollectorRegistry()
    worker = reconciler(sense, fleet, serde, sources, registry=registry)
    stop = asyncio.Event()
    stop.set()
    assert await worker.run_once(stop) == 1
    released = {"result": "released", "media_server": "default"}
    assert registry.get_sample_value("sense_reconcile_items_total", released) == 1
    async with sense.unit() as uow:
        [claimed] = await uow.reconcile.claim(
            "x", list(ALL_PARTITIONS), media_server="default", lease_seconds=30, limit=1
        )
    worker._owned.revoke([claimed.partition])
    assert await worker._one(claimed, "default", stopping=False) is ReconcileItemResult.RELEASED
    assert fleet.client("default").calls == []
    status = await devices.reconcile_status(device.id)
    assert (status.status, status.attempts) == ("pending", 0)
    async with sense.unit() as uow:  # released, so claimable again at once
        again = await uow.reconcile.claim(
            "y", list(ALL_PARTITIONS), media_server="default", lease_seconds=30, limit=1
        )
    assert len(again) == 1


async def test_the_drift_check_repairs_a_path_changed_behind_senses_back(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris, clock: ManualClock
) -> None:
    fleet = fleet_of("default")
    mediamtx = fleet.client("default")
    enabled, disabled = await new_device(devices), await new_device(devices)
    worker = reconciler(sense, fleet, serde, sources, drift_check_seconds=0.5)
    assert await worker.run_once() == 2
    await devices.set_desired_state(disabled.id, DesiredState.DISABLED, actor="op")
    assert await worker.run_once() == 1
    assert await worker.mark_drift_checks() == 0  # results are newer than the drift interval

    # Behind Sense's back: the enabled device's path is deleted, the disabled one's path is re-created.
    del mediamtx.paths[enabled.path_name]
    mediamtx.paths[disabled.path_name] = PathConfig("rtsp://127.0.0.1:1/hand-made")
    clock.advance(0.6)
    assert await worker.mark_drift_checks() == 2
    assert await worker.run_once() == 2
    assert mediamtx.paths == {enabled.path_name: source_of(enabled)}
    for device in (enabled, disabled):
        status = await devices.reconcile_status(device.id)
        assert status.status == "converged"
        assert status.observed_generation == status.desired_generation


async def test_a_site_move_creates_on_the_new_server_then_deletes_exactly_on_the_old(
    sense: MemorySense, serde: AvroSerde, sources: SourceUris
) -> None:
    devices = device_service(
        sense, serde, sources, media_servers=frozenset({"mtx-a", "mtx-b"}), default_media_server="mtx-a"
    )
    journal: list[tuple[str, str, str]] = []
    fleet = fleet_of("mtx-a", "mtx-b", journal=journal)
    moved = [await new_device(devices, f"site-1/cam-{n}") for n in range(3)]
    stays = await new_device(devices, "site-2/cam-0", site="site-2")
    worker = reconciler(sense, fleet, serde, sources)
    assert await worker.run_once() == 4
    fleet.client("mtx-b").paths["site-1/cam-00"] = PathConfig("rtsp://192.0.2.9/hand-made")
    site = await devices.sites.configure_site(
        "tenant-a", "site-1", max_video_channels=None, media_server_id="mtx-b", actor="op"
    )
    assert site.media_server_id == "mtx-b"
    journal.clear()
    assert await worker.run_once() == 3
    assert set(fleet.client("mtx-a").paths) == {stays.path_name}
    assert set(fleet.client("mtx-b").paths) == {d.path_name for d in moved} | {"site-1/cam-00"}
    for device in moved:
        calls = [(server, action) for server, action, name in journal if name == device.path_name]
        assert calls == [("mtx-b", "add"), ("mtx-a", "delete")]  # created first, then deleted exactly
        assert {s for d, s in sense.state.placements if d == device.id} == {"mtx-b"}
        assert (await devices.reconcile_status(device.id)).status == "converged"
        assert (await devices.get_device(device.id)).media_server_id == "mtx-b"
    owners = {server for d, server, path in sense.state.ownership if path == moved[0].path_name}
    assert owners == {"mtx-a", "mtx-b"}


async def test_a_failed_delete_on_the_old_server_keeps_both_placements_until_a_retry(
    sense: MemorySense, serde: AvroSerde, sources: SourceUris, clock: ManualClock
) -> None:
    devices = device_service(
        sense, serde, sources, media_servers=frozenset({"mtx-a", "mtx-b"}), default_media_server="mtx-a"
    )
    fleet = fleet_of("mtx-a", "mtx-b")
    device = await new_device(devices, "lobby/cam")
    worker = reconciler(sense, fleet, serde, sources)
    assert await worker.run_once() == 1
    await devices.sites.configure_site(
        "tenant-a", "site-1", max_video_channels=None, media_server_id="mtx-b", actor="op"
    )
    fleet.client("mtx-a").failures.append("mediamtx_http_500")
    assert await worker.run_once() == 1
    status = await devices.reconcile_status(device.id)
    assert (status.status, status.last_error_code) == ("failed", "mediamtx_http_500")
    assert {s for d, s in sense.state.placements if d == device.id} == {"mtx-a", "mtx-b"}
    clock.advance(1.0)
    assert await worker.run_once() == 1
    assert {s for d, s in sense.state.placements if d == device.id} == {"mtx-b"}
    assert "lobby/cam" not in fleet.client("mtx-a").paths and "lobby/cam" in fleet.client("mtx-b").paths


async def test_a_server_removed_from_the_settings_is_a_recorded_failure_without_calls(
    sense: MemorySense, serde: AvroSerde, sources: SourceUris
) -> None:
    devices = device_service(
        sense, serde, sources, media_servers=frozenset({"mtx-a", "mtx-b"}), default_media_server="mtx-a"
    )
    device = await new_device(devices, "old/cam")
    only_b = fleet_of("mtx-b")  # mtx-a was unregistered meanwhile
    assert await reconciler(sense, only_b, serde, sources).run_once() == 1
    status = await devices.reconcile_status(device.id)
    assert (status.status, status.last_error_code) == ("failed", "media_server_not_registered")
    assert only_b.client("mtx-b").calls == []


async def test_an_unreadable_source_uri_is_a_stable_code_and_no_call(
    sense: MemorySense, devices: Devices, serde: AvroSerde
) -> None:
    device = await new_device(devices)
    stored = sense.state.devices[device.id]
    assert stored.plaintext is None and SECRET.encode() not in (stored.ciphertext or b"")
    other = SourceUris(EncryptionKeyRing({"k9": os.urandom(32)}, "k9"))
    fleet = fleet_of("default")
    assert await reconciler(sense, fleet, serde, other).run_once() == 1
    status = await devices.reconcile_status(device.id)
    assert (status.status, status.last_error_code) == ("failed", "secret_key_unknown")
    assert fleet.client("default").calls == []


async def test_a_legacy_cleartext_source_is_still_configured(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris
) -> None:
    device = await new_device(devices)
    sense.store_cleartext_source(device.id, "rtsp://127.0.0.1:1/legacy")
    fleet = fleet_of("default")
    assert await reconciler(sense, fleet, serde, sources).run_once() == 1
    assert fleet.client("default").paths == {device.path_name: PathConfig("rtsp://127.0.0.1:1/legacy")}


async def test_a_configuration_mediamtx_refuses_waits_for_a_change_and_a_valid_one_converges(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris, clock: ManualClock
) -> None:
    """A device stored before the stricter validation, whose source MediaMTX refuses: failed once, with
    MediaMTX's redacted reason, counted, and never claimed again until the device changes."""
    device = await new_device(devices)
    sense.store_cleartext_source(device.id, f"RTSP://admin:{SECRET}@127.0.0.1:1/legacy")
    fleet = fleet_of("default")
    registry = CollectorRegistry()
    worker = reconciler(sense, fleet, serde, sources, registry=registry)
    assert await worker.run_once() == 1
    status = await devices.reconcile_status(device.id)
    assert (status.status, status.attempts, status.next_attempt_at) == ("failed", 1, None)
    assert (status.last_error_code, status.last_error_reason) == (
        "mediamtx_http_400",
        "invalid source: <redacted>",
    )
    text = render_latest(registry)[0].decode()
    assert 'sense_reconcile_items_total{media_server="default",result="refused"} 1.0' in text
    assert 'sense_reconcile_refused{media_server="default"} 1.0' in text
    assert SECRET not in text
    clock.advance(limits.RETRY_BACKOFF_CAP_SECONDS * 10)
    assert await worker.run_once() == 0, "not retried: the same configuration would be refused again"
    assert [action for action, _ in fleet.client("default").calls] == ["add", "get"], "refused, not there"

    await devices.change_config(device.id, name=None, source_uri="rtsp://127.0.0.1:1/fixed", actor="op")
    assert await worker.run_once() == 1
    converged = await devices.reconcile_status(device.id)
    assert (converged.status, converged.last_error_code, converged.last_error_reason) == (
        "converged",
        None,
        None,
    )
    assert fleet.client("default").paths == {device.path_name: PathConfig("rtsp://127.0.0.1:1/fixed")}
    assert 'sense_reconcile_refused{media_server="default"} 0.0' in render_latest(registry)[0].decode()


@pytest.mark.parametrize("http_status", [401, 403, 404, 408, 409, 425, 429, 500, 503])
async def test_answers_that_do_not_refuse_the_configuration_are_retried_with_backoff(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris, http_status: int
) -> None:
    fleet = fleet_of("default")
    code = f"mediamtx_http_{http_status}"
    fleet.client("default").failures.append(MediaMtxError(code, status=http_status, reason="busy"))
    device = await new_device(devices)
    assert await reconciler(sense, fleet, serde, sources).run_once() == 1
    status = await devices.reconcile_status(device.id)
    assert (status.status, status.last_error_code, status.last_error_reason) == ("failed", code, None)
    assert status.next_attempt_at is not None and status.last_result_at is not None
    assert (status.next_attempt_at - status.last_result_at).total_seconds() == 1.0


@pytest.mark.parametrize("http_status", [400, 405, 410, 413, 415, 422])
async def test_every_other_client_error_is_a_refusal(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris, http_status: int
) -> None:
    fleet = fleet_of("default")
    code = f"mediamtx_http_{http_status}"
    fleet.client("default").failures.append(MediaMtxError(code, status=http_status, reason="refused"))
    device = await new_device(devices)
    assert await reconciler(sense, fleet, serde, sources).run_once() == 1
    status = await devices.reconcile_status(device.id)
    assert (status.status, status.last_error_code, status.next_attempt_at) == ("failed", code, None)
    assert status.last_error_reason == "refused"


async def test_metrics_carry_only_enum_labels(
    sense: MemorySense, devices: Devices, serde: AvroSerde, sources: SourceUris
) -> None:
    device = await new_device(devices)
    registry = CollectorRegistry()
    await reconciler(sense, fleet_of("default"), serde, sources, registry=registry).run_once()
    text = render_latest(registry)[0].decode()
    assert 'sense_reconcile_items_total{media_server="default",result="converged"} 1.0' in text
    assert 'sense_reconcile_unconverged{media_server="default"} 0.0' in text
    assert 'sense_reconcile_refused{media_server="default"} 0.0' in text
    for forbidden in (str(device.id), device.path_name, SECRET, "tenant-a", "site-1"):
        assert forbidden not in text


@pytest.mark.parametrize(
    ("lease", "deadline", "ok"), [(20.5, 20.0, True), (20.0, 20.0, False), (19.0, 20.0, False)]
)
def test_deadline_not_below_the_lease_refuses_to_start(
    sense: MemorySense, serde: AvroSerde, sources: SourceUris, lease: float, deadline: float, ok: bool
) -> None:
    def build() -> Reconciler:
        return Reconciler(
            sense.units(),
            MediaFleet({"default": MemoryMediaMtx(deadline_seconds=deadline)}),
            OwnedPartitions("t"),
            ReconcileMetrics(CollectorRegistry()),
            serde,
            owner="a",
            sources=sources,
            lease_seconds=lease,
        )

    if ok:
        build()
    else:
        with pytest.raises(ConfigError):
            build()


@pytest.mark.parametrize(("batch", "ok"), [(1, True), (128, True), (129, False), (0, False)])
def test_claim_batch_is_1_to_128(
    sense: MemorySense, serde: AvroSerde, sources: SourceUris, batch: int, ok: bool
) -> None:
    def build() -> Reconciler:
        return Reconciler(
            sense.units(),
            MediaFleet({"default": MemoryMediaMtx()}),
            OwnedPartitions("t"),
            ReconcileMetrics(CollectorRegistry()),
            serde,
            owner="a",
            sources=sources,
            batch=batch,
        )

    if ok:
        build()
    else:
        with pytest.raises(ConfigError):
            build()
