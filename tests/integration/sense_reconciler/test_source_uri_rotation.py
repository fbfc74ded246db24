"""Rotating the key of Sense's source URIs while the Control API keeps changing them (real PostgreSQL):
every URI ends under the new key, no change is lost, and the old key can then be dropped."""

from __future__ import annotations

import asyncio
import os

import asyncpg
import pytest

from sense_reconciler.adapters.source_uri_secrets import SourceUriSecrets
from sense_reconciler.adapters.unit_of_work import PostgresSenseUnitOfWork, postgres_units
from sense_reconciler.domain.model import DesiredState
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.source_uris import SourceUris
from tests.support.sense_devices import DEVICE_TOPIC_PARTITIONS
from tests.support.stack import MigratedSchema
from yovision_platform.messaging import AvroSerde
from yovision_platform.security import EncryptionKeyRing, SecretUnreadable, rotate_keys


def service(pool: asyncpg.Pool, schema: MigratedSchema, serde: AvroSerde, ring: EncryptionKeyRing) -> Devices:
    return Devices(
        postgres_units(pool, schema.name),
        serde,
        device_topic="sense.device.v1",
        partitions=DEVICE_TOPIC_PARTITIONS,
        sources=SourceUris(ring),
    )


async def stored_uri(
    pool: asyncpg.Pool, schema: MigratedSchema, ring: EncryptionKeyRing, device_id: object
) -> str:
    async with PostgresSenseUnitOfWork(pool, schema.name) as uow:
        stored = await uow.devices.stored_source(device_id)  # type: ignore[arg-type]
    return SourceUris(ring).reveal(device_id, stored)  # type: ignore[arg-type]


async def test_rotation_while_the_api_changes_uris_loses_nothing(
    sense_pool: asyncpg.Pool, sense_schema: MigratedSchema, serde: AvroSerde
) -> None:
    old, new = os.urandom(32), os.urandom(32)
    before = service(sense_pool, sense_schema, serde, EncryptionKeyRing({"k1": old}, "k1"))
    devices = [
        await before.create_device(
            tenant_id="tenant-a",
            site_id=f"site-{n // 16}",
            name="cam",
            path_name=f"rot/cam-{n}",
            source_uri=f"rtsp://admin:pw-{n}@192.0.2.1/{n}",
            desired_state=DesiredState.DISABLED,
            actor="op",
        )
        for n in range(50)
    ]
    ring = EncryptionKeyRing({"k1": old, "k2": new}, "k2")
    serving = service(sense_pool, sense_schema, serde, ring)
    expected = {d.id: f"rtsp://admin:pw-{n}@192.0.2.1/{n}" for n, d in enumerate(devices)}

    async def change_while_rotating() -> None:
        for device in devices[::4]:
            uri = f"rtsp://admin:changed@192.0.2.2/{device.id.hex[:6]}"
            await serving.change_config(device.id, name=None, source_uri=uri, actor="op")
            expected[device.id] = uri
            await asyncio.sleep(0)

    report, _ = await asyncio.gather(
        rotate_keys(sense_pool, SourceUriSecrets(sense_schema.name), ring, batch_rows=6),
        change_while_rotating(),
    )
    assert report.unreadable == {} and report.changed_meanwhile == 0
    only_new = EncryptionKeyRing({"k2": new}, "k2")
    for device_id, uri in expected.items():
        assert await stored_uri(sense_pool, sense_schema, only_new, device_id) == uri
    again = await rotate_keys(sense_pool, SourceUriSecrets(sense_schema.name), ring)
    assert (again.rotated, again.already_current) == (0, len(devices))


async def test_a_uri_under_a_key_no_longer_in_the_ring_is_reported_and_left_alone(
    sense_pool: asyncpg.Pool, sense_schema: MigratedSchema, serde: AvroSerde
) -> None:
    lost = EncryptionKeyRing({"k0": os.urandom(32)}, "k0")
    device = await service(sense_pool, sense_schema, serde, lost).create_device(
        tenant_id="tenant-a",
        site_id="site-1",
        name="cam",
        path_name="lost/cam",
        source_uri="rtsp://admin:pw@192.0.2.1/x",
        desired_state=DesiredState.DISABLED,
        actor="op",
    )
    ring = EncryptionKeyRing({"k2": os.urandom(32)}, "k2")
    report = await rotate_keys(sense_pool, SourceUriSecrets(sense_schema.name), ring)
    assert (report.rotated, dict(report.unreadable)) == (0, {"secret_key_unknown": 1})
    with pytest.raises(SecretUnreadable) as caught:
        await stored_uri(sense_pool, sense_schema, ring, device.id)
    assert caught.value.code == "secret_key_unknown"
    # an operator can still replace it: the new URI is sealed under the active key
    await service(sense_pool, sense_schema, serde, ring).change_config(
        device.id, name=None, source_uri="rtsp://admin:new@192.0.2.1/x", actor="op"
    )
    assert await stored_uri(sense_pool, sense_schema, ring, device.id) == "rtsp://admin:new@192.0.2.1/x"
