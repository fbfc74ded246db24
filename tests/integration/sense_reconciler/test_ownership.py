"""Per-device ownership over Kafka: two reconcilers in one consumer group split the partitions and each
device is reconciled by exactly one of them; the due row's partition is the producer's partition."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from sense_reconciler.adapters.mediamtx import MediaMtxClient
from sense_reconciler.adapters.unit_of_work import postgres_units
from sense_reconciler.domain.model import DesiredState
from sense_reconciler.entrypoints.device_consumer import DeviceEventConsumer
from sense_reconciler.entrypoints.reconciler_worker import ReconcilerWorker
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.metrics import ReconcileMetrics
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.reconciler import Reconciler
from sense_reconciler.service_layer.source_uris import SourceUris
from tests.support.sense_devices import DEVICE_TOPIC_PARTITIONS
from tests.support.stack import MigratedSchema, Stack, create_topic, delete_topic
from yovision_platform.mediamtx import SINGLE_MEDIA_SERVER_ID, MediaFleet
from yovision_platform.messaging import AvroSerde, start_producer

PARTITIONS = 4


@pytest.fixture
async def device_topic(stack: Stack) -> AsyncIterator[str]:
    name = f"test.device.{uuid.uuid4().hex[:10]}.v1"
    await create_topic(stack.kafka_bootstrap, name, partitions=PARTITIONS)
    yield name
    await delete_topic(stack.kafka_bootstrap, name)


async def eventually(check: Callable[[], Awaitable[bool]], within_seconds: float = 45.0) -> None:
    deadline = time.monotonic() + within_seconds
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.2)


async def relay_device_events(pool: asyncpg.Pool, schema: str, topic: str, bootstrap: str) -> None:
    """Publish the test topic's outbox rows (a stand-in for the relay, which would also publish to the
    shared audit and ownership topics)."""
    producer = await start_producer(bootstrap, client_id="sense-test")
    try:
        rows = await pool.fetch(
            f'SELECT id, message_key, value FROM "{schema}".outbox WHERE topic = $1 ORDER BY id', topic
        )
        for row in rows:
            await producer.send_and_wait(topic, value=bytes(row["value"]), key=bytes(row["message_key"]))
    finally:
        await producer.stop()


async def test_the_due_row_partition_is_the_producer_partition(
    stack: Stack, devices: Devices, sense_pool: asyncpg.Pool, sense_schema: MigratedSchema
) -> None:
    topic = f"test.device.{uuid.uuid4().hex[:10]}.v1"
    await create_topic(stack.kafka_bootstrap, topic, partitions=DEVICE_TOPIC_PARTITIONS)
    producer = await start_producer(stack.kafka_bootstrap, client_id="sense-test")
    try:
        for _ in range(30):
            device_id = uuid.uuid4()
            meta = await producer.send_and_wait(topic, value=b"x", key=str(device_id).encode())
            assert meta.partition == devices.partition_of(device_id)
    finally:
        await producer.stop()
        await delete_topic(stack.kafka_bootstrap, topic)


async def test_two_instances_split_partitions_and_reconcile_each_device_once(
    stack: Stack,
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    serde: AvroSerde,
    sources: SourceUris,
    device_topic: str,
) -> None:
    units = postgres_units(sense_pool, sense_schema.name)
    service = Devices(
        units,
        serde,
        device_topic=device_topic,
        partitions=PARTITIONS,
        sources=sources,
    )
    group = f"sense-reconciler-test-{uuid.uuid4().hex[:8]}"
    mediamtx = MediaMtxClient(
        stack.mediamtx_api_url, credentials=stack.mediamtx_credentials(), deadline_seconds=5.0
    )
    stop = asyncio.Event()
    instances: list[tuple[OwnedPartitions, CollectorRegistry]] = []
    tasks: list[asyncio.Task[None]] = []
    for name in ("inst-a", "inst-b"):
        owned = OwnedPartitions(device_topic)
        registry = CollectorRegistry()
        worker = Reconciler(
            units,
            MediaFleet({SINGLE_MEDIA_SERVER_ID: mediamtx}),
            owned,
            ReconcileMetrics(registry),
            serde,
            owner=name,
            sources=sources,
            lease_seconds=10.0,
            scan_interval_seconds=30.0,  # so convergence below proves the event wake-up
        )
        consumer = DeviceEventConsumer(
            sense_pool,
            sense_schema.name,
            serde,
            owned,
            kafka=stack.kafka_bootstrap,
            group_id=group,
            client_id=name,
        )
        instances.append((owned, registry))
        tasks += [
            asyncio.create_task(ReconcilerWorker(worker).run(stop)),
            asyncio.create_task(consumer.run(stop)),
        ]
    paths: list[str] = []
    try:

        async def split() -> bool:
            a, b = (owned.snapshot() for owned, _ in instances)
            return bool(a) and bool(b) and not (a & b) and (a | b) == set(range(PARTITIONS))

        await eventually(split)
        await asyncio.sleep(0.5)  # let both reconcilers finish their initial (empty) rounds and sleep
        created = []
        for n in range(8):
            path = f"t-{uuid.uuid4().hex[:12]}"
            paths.append(path)
            created.append(
                await service.create_device(
                    tenant_id="tenant-a",
                    site_id="site-1",
                    name=f"cam {n}",
                    path_name=path,
                    source_uri=f"rtsp://127.0.0.1:1/{path}",
                    desired_state=DesiredState.ENABLED,
                    actor="op",
                )
            )
        await relay_device_events(sense_pool, sense_schema.name, device_topic, stack.kafka_bootstrap)

        async def converged() -> bool:
            statuses = [await service.reconcile_status(d.id) for d in created]
            return all(s.status == "converged" for s in statuses)

        await eventually(converged, within_seconds=20.0)
        converged_counts = [
            registry.get_sample_value(
                "sense_reconcile_items_total", {"result": "converged", "media_server": "default"}
            )
            for _, registry in instances
        ]
        assert sum(c or 0 for c in converged_counts) == len(created)
        assert [await mediamtx.get_path(p) is not None for p in paths] == [True] * len(paths)
    finally:
        stop.set()
        for task in tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 15)
        for path in paths:
            await mediamtx.delete_path(path)
        await mediamtx.aclose()
