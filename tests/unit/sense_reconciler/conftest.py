"""Use-case tests of sense-reconciler on the in-memory fakes (sense_reconciler.adapters.memory), which the
contract suites in tests/ports/sense_reconciler prove equal to the PostgreSQL, MediaMTX and Bell adapters.

The fake database runs on a `ManualClock`: time moves only when a test says so (a backoff, a lease)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sense_reconciler.adapters.memory import MemorySense
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.source_uris import SourceUris
from tests.support.sense_devices import devices_with
from tests.support.stack import private_file
from yovision_platform.mediamtx import SINGLE_MEDIA_SERVER_ID
from yovision_platform.messaging import AvroSerde, SchemaRegistry
from yovision_platform.security import EncryptionKeyRing

ISSUER = "http://127.0.0.1:14444"


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
    return devices_with(
        sense.units(), serde, sources, media_servers=media_servers, default_media_server=default_media_server
    )


@pytest.fixture
def devices(sense: MemorySense, serde: AvroSerde, sources: SourceUris) -> Devices:
    return device_service(sense, serde, sources)


@pytest.fixture
def sense_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The environment of a minimal valid `SenseReconcilerSettings` (no other SENSE_ variable)."""
    for name in list(os.environ):
        if name.startswith("SENSE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SENSE_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    monkeypatch.setenv("SENSE_MEDIAMTX_API_URL", "http://127.0.0.1:19997/")
    dsn = "postgresql://sense_app:pw@127.0.0.1:55432/yovision\n"
    monkeypatch.setenv("SENSE_DATABASE_DSN_FILE", str(private_file(tmp_path / "dsn", dsn)))
    monkeypatch.setenv("SENSE_AUTH_ISSUER", ISSUER)
    key = private_file(tmp_path / "k1.key", os.urandom(32).hex() + "\n")
    monkeypatch.setenv("SENSE_SECRETS_KEY_FILES", json.dumps({"k1": str(key)}))
