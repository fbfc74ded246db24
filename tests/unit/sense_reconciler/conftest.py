"""Use-case tests of sense-reconciler on the in-memory fakes (sense_reconciler.adapters.memory), which the
contract suites in tests/ports/sense_reconciler prove equal to the PostgreSQL, MediaMTX and Bell adapters.

The fake database runs on a `ManualClock`: time moves only when a test says so (a backoff, a lease)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

from sense_reconciler.adapters.memory import MemorySense
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.source_uris import SourceUris
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.encryption import EncryptionKeyRing
from yovision_platform.media_servers import SINGLE_MEDIA_SERVER_ID

DEVICE_TOPIC = "sense.device.v1"
DEVICE_TOPIC_PARTITIONS = 12


class ManualClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture(scope="session")
def serde() -> AvroSerde:
    return AvroSerde(SchemaRegistry.load())


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def sense(clock: ManualClock) -> MemorySense:
    return MemorySense(clock)


@pytest.fixture
def sources() -> SourceUris:
    """Source URIs under a fresh key ring (one key, "k1")."""
    return SourceUris(EncryptionKeyRing({"k1": os.urandom(32)}, "k1"))


def device_service(
    sense: MemorySense,
    serde: AvroSerde,
    sources: SourceUris,
    *,
    media_servers: frozenset[str] = frozenset({SINGLE_MEDIA_SERVER_ID}),
    default_media_server: str = SINGLE_MEDIA_SERVER_ID,
) -> Devices:
    return Devices(
        sense.units(),
        serde,
        device_topic=DEVICE_TOPIC,
        partitions=DEVICE_TOPIC_PARTITIONS,
        sources=sources,
        media_servers=media_servers,
        default_media_server=default_media_server,
    )


@pytest.fixture
def devices(sense: MemorySense, serde: AvroSerde, sources: SourceUris) -> Devices:
    return device_service(sense, serde, sources)
