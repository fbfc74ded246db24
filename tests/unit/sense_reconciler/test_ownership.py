from __future__ import annotations

import asyncio

from aiokafka import TopicPartition

from sense_reconciler.service_layer.ownership import OwnedPartitions


async def test_assignment_adds_and_wakes_revocation_removes_before_returning() -> None:
    owned = OwnedPartitions("sense.device.v1")
    await owned.on_assigned({TopicPartition("sense.device.v1", 1), TopicPartition("other", 2)})
    assert owned.snapshot() == {1}
    assert await owned.wait(0.01) is True
    assert await owned.wait(0.01) is False
    await owned.on_assigned({TopicPartition("sense.device.v1", 3)})
    await owned.on_revoked({TopicPartition("sense.device.v1", 1)})
    assert owned.snapshot() == {3}
    assert not owned.owns(1) and owned.owns(3)


async def test_revocation_waits_for_the_item_in_flight_on_a_revoked_partition() -> None:
    owned = OwnedPartitions("t", drain_timeout_seconds=5.0)
    owned.assign([1, 2])
    finished: list[str] = []

    async def item() -> None:
        async with owned.working(1):
            await asyncio.sleep(0.1)
            finished.append("item")

    task = asyncio.create_task(item())
    await asyncio.sleep(0.01)
    await owned.on_revoked({TopicPartition("t", 1)})
    finished.append("revoked")
    await task
    assert finished == ["item", "revoked"]
    assert owned.snapshot() == {2}


async def test_revocation_does_not_wait_for_other_partitions_and_gives_up_after_the_timeout() -> None:
    owned = OwnedPartitions("t", drain_timeout_seconds=0.05)
    owned.assign([1, 2])
    release = asyncio.Event()

    async def item(partition: int) -> None:
        async with owned.working(partition):
            await release.wait()

    task = asyncio.create_task(item(2))
    await asyncio.sleep(0.01)
    assert await owned.drain({1}) is True
    assert await owned.drain({2}) is False
    release.set()
    await task
    assert await owned.drain({2}) is True


async def test_a_change_wakes_the_writers_only_for_a_partition_this_instance_owns() -> None:
    owned = OwnedPartitions("t")
    owned.assign([2, 5])
    assert await owned.wait(0.01) is True  # the assignment's wake-up
    owned.wake_for([1, 3])
    assert await owned.wait(0.01) is False
    owned.wake_for([])
    assert await owned.wait(0.01) is False
    owned.wake_for([3, 5])
    assert await owned.wait(0.01) is True
