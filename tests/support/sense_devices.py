"""Sense's devices for the tests of every tier: a body of `POST /v1/devices` (the Control API tests), a device
created through the use case (the reconciler tests)."""

from __future__ import annotations

import uuid

from sense_reconciler.domain.model import DesiredState
from sense_reconciler.domain.records import DeviceRow
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.ports import UnitOfWorkFactory
from sense_reconciler.service_layer.source_uris import SourceUris
from yovision_platform.mediamtx import SINGLE_MEDIA_SERVER_ID
from yovision_platform.messaging import AvroSerde

DEVICE_TOPIC = "sense.device.v1"
DEVICE_TOPIC_PARTITIONS = 12
CAMERA_SECRET = "cam-pw-9"  # the password in the reconciler tests' source URIs


def device_body(*, userinfo: str = "admin:pw", **overrides: object) -> dict[str, object]:
    """A valid device with a fresh path name; `userinfo`: the source URI's user and password (a secret the
    test may look for in logs and answers)."""
    return {
        "tenant_id": "tenant-a",
        "site_id": "site-1",
        "name": "Lobby",
        "path_name": f"p-{uuid.uuid4().hex[:12]}",
        "source_uri": f"rtsp://{userinfo}@10.1.2.3/live",
        "desired_state": "enabled",
        **overrides,
    }


async def new_device(
    devices: Devices, path: str | None = None, *, site: str = "site-1", enabled: bool = True
) -> DeviceRow:
    """A device of tenant-a on `site` with path `path` (fresh by default), its source on 127.0.0.1:1."""
    path = path or f"t-{uuid.uuid4().hex[:12]}"
    return await devices.create_device(
        tenant_id="tenant-a",
        site_id=site,
        name="cam",
        path_name=path,
        source_uri=f"rtsp://admin:{CAMERA_SECRET}@127.0.0.1:1/{path}",
        desired_state=DesiredState.ENABLED if enabled else DesiredState.DISABLED,
        actor="op",
    )


def devices_with(
    units: UnitOfWorkFactory,
    serde: AvroSerde,
    sources: SourceUris,
    *,
    media_servers: frozenset[str] = frozenset({SINGLE_MEDIA_SERVER_ID}),
    default_media_server: str = SINGLE_MEDIA_SERVER_ID,
) -> Devices:
    """The device commands on `units` (the fakes' or PostgreSQL's), on the catalogue's device topic."""
    return Devices(
        units,
        serde,
        device_topic=DEVICE_TOPIC,
        partitions=DEVICE_TOPIC_PARTITIONS,
        sources=sources,
        media_servers=media_servers,
        default_media_server=default_media_server,
    )
