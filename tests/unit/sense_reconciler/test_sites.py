"""Sites on the fakes: the limit of enabled devices (at, under, over), the defaults of a site Sense never
saw, and a move to another registered MediaMTX server as one transaction over every device of the site."""

from __future__ import annotations

import uuid

import pytest

from sense_reconciler.adapters.memory import MemorySense
from sense_reconciler.domain import limits
from sense_reconciler.domain.errors import InvalidDeviceInput, MediaServerNotRegistered, SiteLimitReached
from sense_reconciler.domain.model import DesiredState
from sense_reconciler.domain.records import DeviceRow
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.source_uris import SourceUris
from tests.unit.sense_reconciler.conftest import device_service
from yovision_platform.messaging import AvroSerde

SERVERS = frozenset({"mtx-a", "mtx-b"})


@pytest.fixture
def fleet_devices(sense: MemorySense, serde: AvroSerde, sources: SourceUris) -> Devices:
    return device_service(sense, serde, sources, media_servers=SERVERS, default_media_server="mtx-a")


async def create(devices: Devices, *, site: str = "site-1", enabled: bool = True) -> DeviceRow:
    return await devices.create_device(
        tenant_id="tenant-a",
        site_id=site,
        name="cam",
        path_name=f"p-{uuid.uuid4().hex[:12]}",
        source_uri="rtsp://u:pw@192.0.2.7/stream",
        desired_state=DesiredState.ENABLED if enabled else DesiredState.DISABLED,
        actor="op",
    )


async def test_a_site_sense_never_saw_has_the_defaults(fleet_devices: Devices, sense: MemorySense) -> None:
    site = await fleet_devices.sites.get_site("tenant-a", "new-site")
    assert (site.max_video_channels, site.media_server_id, site.enabled_devices) == (
        limits.SITE_MAX_VIDEO_CHANNELS_DEFAULT,
        "mtx-a",
        0,
    )
    assert sense.state.sites == {}, "a read creates nothing"


@pytest.mark.parametrize(("limit", "allowed"), [(3, True), (4, True), (2, False)])
async def test_a_limit_below_the_enabled_devices_is_refused(
    fleet_devices: Devices, limit: int, allowed: bool
) -> None:
    for _ in range(3):
        await create(fleet_devices)
    await create(fleet_devices, enabled=False)
    change = fleet_devices.sites.configure_site(
        "tenant-a", "site-1", max_video_channels=limit, media_server_id=None, actor="op"
    )
    if allowed:
        site = await change
        assert (site.max_video_channels, site.enabled_devices) == (limit, 3)
    else:
        with pytest.raises(SiteLimitReached):
            await change
        assert (await fleet_devices.sites.get_site("tenant-a", "site-1")).max_video_channels == 16


@pytest.mark.parametrize(
    ("limit", "media_server_id", "code"),
    [
        (None, None, "invalid_body"),
        (0, None, "invalid_max_video_channels"),
        (129, None, "invalid_max_video_channels"),
        (None, "MTX-A", "invalid_media_server_id"),
    ],
)
async def test_a_change_that_sets_nothing_or_something_invalid_is_refused(
    fleet_devices: Devices,
    sense: MemorySense,
    limit: int | None,
    media_server_id: str | None,
    code: str,
) -> None:
    with pytest.raises(InvalidDeviceInput) as refused:
        await fleet_devices.sites.configure_site(
            "tenant-a", "site-1", max_video_channels=limit, media_server_id=media_server_id, actor="op"
        )
    assert refused.value.code == code
    assert sense.state.sites == {}


async def test_an_unregistered_server_is_refused(fleet_devices: Devices, sense: MemorySense) -> None:
    await create(fleet_devices)
    before = len(sense.outbox.committed)
    with pytest.raises(MediaServerNotRegistered):
        await fleet_devices.sites.configure_site(
            "tenant-a", "site-1", max_video_channels=None, media_server_id="mtx-c", actor="op"
        )
    assert len(sense.outbox.committed) == before


async def test_a_move_changes_every_device_of_the_site_in_one_transaction(
    fleet_devices: Devices, sense: MemorySense, serde: AvroSerde
) -> None:
    moved = [await create(fleet_devices), await create(fleet_devices, enabled=False)]
    stays = await create(fleet_devices, site="site-2")
    commits, facts = len(sense.outbox.committed), len(sense.state.facts)
    site = await fleet_devices.sites.configure_site(
        "tenant-a", "site-1", max_video_channels=8, media_server_id="mtx-b", actor="op"
    )
    assert (site.max_video_channels, site.media_server_id, site.enabled_devices) == (8, "mtx-b", 1)
    for before in moved:
        after = await fleet_devices.get_device(before.id)
        assert (after.media_server_id, after.config_version) == ("mtx-b", before.config_version + 1)
        status = await fleet_devices.reconcile_status(before.id)
        assert (status.media_server_id, status.desired_generation, status.status) == ("mtx-b", 2, "pending")
    assert (await fleet_devices.get_device(stays.id)).media_server_id == "mtx-a"
    events = [serde.decode(m.value) for m in sense.outbox.committed[commits:]]
    changes = [e.record for e in events if e.event_type == "DeviceConfigChanged"]
    assert sorted(c["device_id"] for c in changes) == sorted(str(d.id) for d in moved)
    assert all(
        c["media_server_id"] == "mtx-b" and c["changed_fields"] == ["media_server_id"] for c in changes
    )
    assert [e.event_type for e in events].count("DeviceAuditRecorded") == 2
    new_facts = sense.state.facts[facts:]
    assert [(f.action, tuple(f.changed_fields)) for f in new_facts] == [
        ("device.config_changed", ("media_server_id",))
    ] * 2
    new_device = await create(fleet_devices)
    assert new_device.media_server_id == "mtx-b", "new devices of the site go to its server"


async def test_a_move_to_the_current_server_changes_nothing(
    fleet_devices: Devices, sense: MemorySense
) -> None:
    device = await create(fleet_devices)
    commits = len(sense.outbox.committed)
    await fleet_devices.sites.configure_site(
        "tenant-a", "site-1", max_video_channels=None, media_server_id="mtx-a", actor="op"
    )
    assert len(sense.outbox.committed) == commits
    assert (await fleet_devices.get_device(device.id)).config_version == 1


async def test_a_refused_move_leaves_the_site_and_its_devices_as_they_were(
    fleet_devices: Devices, sense: MemorySense
) -> None:
    for _ in range(2):
        await create(fleet_devices)
    commits = len(sense.outbox.committed)
    with pytest.raises(SiteLimitReached):
        await fleet_devices.sites.configure_site(
            "tenant-a", "site-1", max_video_channels=1, media_server_id="mtx-b", actor="op"
        )
    site = await fleet_devices.sites.get_site("tenant-a", "site-1")
    assert (site.max_video_channels, site.media_server_id) == (16, "mtx-a")
    assert len(sense.outbox.committed) == commits
