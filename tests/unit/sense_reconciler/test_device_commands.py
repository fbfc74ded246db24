"""Control commands on the fakes: one transaction per mutation, site limits, no URI anywhere."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import pytest

from sense_reconciler.adapters.memory import MemorySense
from sense_reconciler.domain.errors import DeviceNotFound, InvalidDeviceInput, PathNameTaken, SiteLimitReached
from sense_reconciler.domain.model import DesiredState
from sense_reconciler.domain.records import DeviceRow
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.source_uris import SourceUris
from tests.support.sense_devices import DEVICE_TOPIC, DEVICE_TOPIC_PARTITIONS
from yovision_platform.messaging import AvroSerde, partition_for_key

SECRET = "hunter2-secret"
ENABLED, DISABLED = DesiredState.ENABLED, DesiredState.DISABLED


async def create(
    devices: Devices, n: int, *, site: str = "site-1", state: DesiredState = ENABLED
) -> DeviceRow:
    return await devices.create_device(
        tenant_id="tenant-a",
        site_id=site,
        name=f"Camera {n}",
        path_name=f"p-{uuid.uuid4().hex[:12]}",
        source_uri=f"rtsp://admin:{SECRET}@10.0.0.{n % 250}/stream",
        desired_state=state,
        actor="operator:alice",
    )


async def set_site_limit(devices: Devices, tenant_id: str, site_id: str, limit: int) -> int:
    site = await devices.sites.configure_site(
        tenant_id, site_id, max_video_channels=limit, media_server_id=None, actor="control-api"
    )
    return site.max_video_channels


def counts(sense: MemorySense) -> dict[str, int]:
    """Committed rows per table of the fake."""
    state = sense.state
    return {
        "devices": len(state.devices),
        "reconcile_state": len(state.due),
        "device_operation_outbox": len(state.facts),
        "outbox": len(sense.outbox.committed),
    }


async def test_create_writes_device_fact_events_and_due_row_together(
    devices: Devices, sense: MemorySense, serde: AvroSerde
) -> None:
    device = await create(devices, 1)
    assert counts(sense) == {
        "devices": 1,
        "reconcile_state": 1,
        "device_operation_outbox": 1,
        "outbox": 2,
    }
    [due] = sense.state.due.values()
    assert due.partition == partition_for_key(str(device.id).encode(), 12)
    assert (due.desired_generation, due.observed_generation, due.status) == (1, 0, "pending")
    outbox = sense.outbox.committed
    assert [m.topic for m in outbox] == ["sense.device.v1", "sense.audit.v1"]
    assert all(m.key == str(device.id).encode() for m in outbox)
    decoded = serde.decode(outbox[0].value)
    assert decoded.event_type == "DeviceRegistered"
    assert decoded.record["path_name"] == device.path_name
    for message in outbox:
        assert SECRET.encode() not in bytes(message.value)
    [fact] = sense.state.facts
    assert fact.action == "device.created" and fact.fact_version == 2
    assert SECRET not in repr(fact)


async def test_failed_mutation_leaves_nothing_behind(devices: Devices, sense: MemorySense) -> None:
    device = await create(devices, 1)
    before = counts(sense)
    with pytest.raises(PathNameTaken):
        await devices.create_device(
            tenant_id="tenant-a",
            site_id="site-1",
            name="dup",
            path_name=device.path_name,
            source_uri="rtsp://h/x",
            desired_state=ENABLED,
            actor="operator:alice",
        )
    with pytest.raises(DeviceNotFound):
        await devices.set_desired_states([(device.id, DISABLED), (uuid.uuid4(), DISABLED)], actor="op")
    assert counts(sense) == before
    assert (await devices.get_device(device.id)).desired_state == "enabled"


@pytest.mark.parametrize(("limit", "enabled_before", "allowed"), [(16, 15, True), (16, 16, False)])
async def test_default_site_limit_boundary(
    devices: Devices, limit: int, enabled_before: int, allowed: bool
) -> None:
    for n in range(enabled_before):
        await create(devices, n)
    spare = await create(devices, 99, state=DISABLED)
    if allowed:
        assert (await devices.set_desired_state(spare.id, ENABLED, actor="op")).desired_state == "enabled"
    else:
        with pytest.raises(SiteLimitReached):
            await devices.set_desired_state(spare.id, ENABLED, actor="op")
        with pytest.raises(SiteLimitReached):
            await create(devices, 100)


async def test_site_limit_can_be_raised_to_128_and_no_further(devices: Devices) -> None:
    assert await set_site_limit(devices, "tenant-a", "big", 128) == 128
    with pytest.raises(InvalidDeviceInput):
        await set_site_limit(devices, "tenant-a", "big", 129)
    drafts = [await create(devices, n, site="big", state=DISABLED) for n in range(129)]
    await devices.set_desired_states([(d.id, ENABLED) for d in drafts[:128]], actor="op")
    with pytest.raises(SiteLimitReached):
        await devices.set_desired_state(drafts[128].id, ENABLED, actor="op")
    with pytest.raises(SiteLimitReached):
        await set_site_limit(devices, "tenant-a", "big", 127)


async def test_batch_is_all_or_nothing_and_counts_the_whole_batch(devices: Devices) -> None:
    await set_site_limit(devices, "tenant-a", "small", 2)
    drafts = [await create(devices, n, site="small", state=DISABLED) for n in range(3)]
    with pytest.raises(SiteLimitReached):
        await devices.set_desired_states([(d.id, ENABLED) for d in drafts], actor="op")
    assert [(await devices.get_device(d.id)).desired_state for d in drafts] == ["disabled"] * 3
    result = await devices.set_desired_states([(d.id, ENABLED) for d in drafts[:2]], actor="op")
    assert [d.desired_state for d in result] == ["enabled", "enabled"]
    with pytest.raises(SiteLimitReached):  # the last state of each device counts: three enabled
        await devices.set_desired_states(
            [(drafts[0].id, DISABLED), (drafts[2].id, ENABLED), (drafts[0].id, ENABLED)], actor="op"
        )
    twice = await devices.set_desired_states([(drafts[0].id, ENABLED), (drafts[0].id, DISABLED)], actor="op")
    assert [d.desired_state for d in twice] == ["disabled", "disabled"]
    await devices.set_desired_states([(drafts[0].id, ENABLED)], actor="op")
    swapped = await devices.set_desired_states(
        [(drafts[0].id, DISABLED), (drafts[2].id, ENABLED)], actor="op"
    )
    assert [d.desired_state for d in swapped] == ["disabled", "enabled"]


async def test_config_change_bumps_version_and_generation_without_echoing_the_uri(
    devices: Devices, sense: MemorySense, serde: AvroSerde
) -> None:
    device = await create(devices, 1)
    unchanged = await devices.change_config(device.id, name=device.name, source_uri=None, actor="op")
    assert unchanged.config_version == 1
    changed = await devices.change_config(
        device.id, name=None, source_uri=f"rtsp://u:{SECRET}-2@h/x", actor="op"
    )
    assert changed.config_version == 2
    status = await devices.reconcile_status(device.id)
    assert status.desired_generation == 2
    [value] = [m.value for m in sense.outbox.committed if m.event_type == "DeviceConfigChanged"]
    assert serde.decode(value).record["changed_fields"] == ["source_uri"]
    assert SECRET.encode() not in bytes(value)


async def test_list_pages_through_every_device_once(devices: Devices) -> None:
    created = {(await create(devices, n)).id for n in range(5)}
    seen: list[uuid.UUID] = []
    after = None
    while True:
        page = await devices.list_devices(tenant_id="tenant-a", after=after, limit=2)
        seen += [d.id for d in page.items]
        if page.next_after is None:
            break
        after = page.next_after
    assert sorted(seen) == sorted(created)


async def test_a_batch_writes_each_device_s_two_events_in_order_in_one_outbox_write(
    devices: Devices, sense: MemorySense
) -> None:
    drafts = [await create(devices, n, state=DISABLED) for n in range(3)]
    before, writes = len(sense.outbox.committed), sense.outbox.writes
    await devices.set_desired_states([(d.id, ENABLED) for d in drafts], actor="op")
    events = sense.outbox.committed[before:]
    assert sense.outbox.writes == writes + 1
    ordered = sorted(drafts, key=lambda d: d.id)  # the batch takes its devices in id order
    assert [(m.event_type, m.key) for m in events] == [
        (event_type, str(d.id).encode())
        for d in ordered
        for event_type in ("DeviceDesiredStateChanged", "DeviceAuditRecorded")
    ]


async def test_the_reconciler_is_woken_after_each_commit_that_made_devices_due(
    sense: MemorySense, serde: AvroSerde, sources: SourceUris
) -> None:
    woken: list[tuple[list[int], int]] = []  # (partitions, committed outbox messages at the wake-up)

    def wake(partitions: Iterable[int]) -> None:
        woken.append((sorted(partitions), len(sense.outbox.committed)))

    devices = Devices(
        sense.units(),
        serde,
        device_topic=DEVICE_TOPIC,
        partitions=DEVICE_TOPIC_PARTITIONS,
        sources=sources,
        media_servers=frozenset({"default", "mtx-b"}),
        default_media_server="default",
        wake_reconciler=wake,
    )
    one, two = await create(devices, 1), await create(devices, 2, state=DISABLED)
    partitions = [devices.partition_of(one.id)], [devices.partition_of(two.id)]
    assert woken == [(partitions[0], 2), (partitions[1], 4)], "after the commit, with its events"
    woken.clear()
    await devices.change_config(one.id, name=None, source_uri=f"rtsp://admin:{SECRET}@10.0.0.9/x", actor="a")
    await devices.change_config(one.id, name="Camera 1", source_uri=None, actor="a")  # nothing changed
    await devices.set_desired_states([(one.id, ENABLED), (two.id, ENABLED)], actor="a")
    assert [p for p, _ in woken] == [partitions[0], partitions[1]], "no change, no wake-up"
    woken.clear()
    with pytest.raises(SiteLimitReached):  # rolled back: no wake-up
        await devices.sites.configure_site(
            "tenant-a", "site-1", max_video_channels=1, media_server_id=None, actor="a"
        )
    await devices.sites.configure_site(
        "tenant-a", "site-1", max_video_channels=None, media_server_id="mtx-b", actor="a"
    )
    assert [p for p, _ in woken] == [sorted(partitions[0] + partitions[1])], (
        "a move wakes for every device moved"
    )
