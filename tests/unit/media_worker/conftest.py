"""media-worker's use cases and routes on the in-memory fakes (proven equal to the real adapters by
tests/ports/media_worker): no PostgreSQL, no ffmpeg, no files, a clock that moves only when told to."""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from media_worker.adapters.memory import (
    FakeTranscoder,
    InMemoryCapability,
    InMemoryLocks,
    InMemoryMedia,
    InMemoryStorage,
    ManualClock,
)
from media_worker.domain.keys import source_key
from media_worker.domain.limits import Limits
from media_worker.domain.material import Material
from media_worker.entrypoints.api import DRAIN_PERMISSION, MediaApi, install_routes
from media_worker.service_layer.activity import Activity
from media_worker.service_layer.drain import Drain
from media_worker.service_layer.events import EventWriter
from media_worker.service_layer.materials import Materials
from media_worker.service_layer.metrics import MediaMetrics
from media_worker.service_layer.ports import MediaUnitOfWork
from media_worker.service_layer.transcoder import TranscodeWorker, WorkerTiming
from media_worker.service_layer.uploads import UploadService
from media_worker.settings import AUDIENCE
from tests.issuers import LocalIssuer
from tests.unit.media_worker.uploading import SMALL_LIMITS
from yovision_platform.access_tokens import use_access_token_verifier
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.web import create_app

INSTANCE = "media-test-a"
OWNER = "user-1"
# The small limits of every upload test; a short slot wait keeps the 429 test fast, and at most 8 chunks.
TEST_LIMITS = replace(SMALL_LIMITS, chunk_slot_wait_seconds=0.05, chunk_count_max=8)
PLENTY_FREE_BYTES = 10 * 1024 * 1024
# What the fake transcoder takes for a video: an MP4 (its first box is `ftyp`).
VIDEO = b"\x00\x00\x00\x18ftypisom" + b"v" * 100
WAIT_SECONDS = 5.0
# The OpenID provider of the routes' tests: one for the session, its key made once.
ISSUER = LocalIssuer()


@functools.cache
def serde() -> AvroSerde:
    return AvroSerde(SchemaRegistry.load())


async def wait_until(condition: Callable[[], bool], within_seconds: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + within_seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.001)


async def body_of(*pieces: bytes) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


@dataclass
class Fakes:
    clock: ManualClock
    db: InMemoryMedia
    locks: InMemoryLocks
    storage: InMemoryStorage
    transcoder: FakeTranscoder
    capability: InMemoryCapability
    activity: Activity
    uploads: UploadService
    materials: Materials
    drain: Drain
    registry: CollectorRegistry
    metrics: MediaMetrics
    woken: list[str] = field(default_factory=list)

    def worker(
        self, *, instance_id: str = INSTANCE, lease_seconds: float = 30.0, rescan_seconds: float = 60.0
    ) -> TranscodeWorker:
        return TranscodeWorker(
            self.db.unit_of_work,
            self.locks,
            self.storage,
            EventWriter(serde()),
            self.activity,
            self.transcoder,
            instance_id=instance_id,
            timing=WorkerTiming(lease_seconds=lease_seconds, rescan_seconds=rescan_seconds),
            metrics=self.metrics,
        )

    def uow(self) -> MediaUnitOfWork:
        return self.db.unit_of_work()

    def events(self) -> list[str]:
        return [m.event_type for m in self.db.outbox.committed]

    def event_payloads(self, event_type: str) -> list[dict[str, Any]]:
        return [
            serde().decode(m.value).record for m in self.db.outbox.committed if m.event_type == event_type
        ]

    def auth(self, subject: str = OWNER, *permissions: str, audience: str = AUDIENCE) -> dict[str, str]:
        """The headers of `subject`'s access token from `ISSUER`, for `audience` (default this service)."""
        return {"Authorization": f"Bearer {ISSUER.token(subject, *permissions, audience=audience)}"}

    @property
    def operator(self) -> dict[str, str]:
        return self.auth("ops", DRAIN_PERMISSION)

    async def material(self, material_id: uuid.UUID, owner: str = OWNER) -> Material:
        return await self.materials.status(owner, material_id)

    async def upload(self, data: bytes = VIDEO, owner: str = OWNER) -> uuid.UUID:
        return await self.uploads.upload_plain(
            owner, "clip", "video/mp4", body_of(data), request_length="100"
        )

    def source(self, material_id: uuid.UUID) -> bytes:
        return self.storage.files[source_key(material_id)]

    def app(self) -> FastAPI:
        app = create_app("media-worker", "test")
        install_routes(app, MediaApi(self.uploads, self.materials, self.drain, self.metrics))
        use_access_token_verifier(app, ISSUER.verifier(AUDIENCE))
        return app


def build_fakes(limits: Limits = TEST_LIMITS) -> Fakes:
    clock = ManualClock()
    db = InMemoryMedia(clock)
    locks, storage, activity = InMemoryLocks(), InMemoryStorage(PLENTY_FREE_BYTES), Activity()
    capability = InMemoryCapability()
    woken: list[str] = []
    events = EventWriter(serde())
    uploads = UploadService(
        db.unit_of_work,
        locks,
        storage,
        events,
        activity,
        instance_id=INSTANCE,
        limits=limits,
        job_queued=lambda: woken.append("upload"),
    )
    materials = Materials(db.unit_of_work, storage, job_queued=lambda: woken.append("retry"))
    drain = Drain(db.unit_of_work, activity, capability, instance_id=INSTANCE)
    registry = CollectorRegistry()
    return Fakes(
        clock,
        db,
        locks,
        storage,
        FakeTranscoder(storage),
        capability,
        activity,
        uploads,
        materials,
        drain,
        registry,
        MediaMetrics(registry, activity),
        woken,
    )


@pytest.fixture
def fakes() -> Fakes:
    return build_fakes()


@pytest.fixture
async def client(fakes: Fakes) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=fakes.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://media.test") as http:
        yield http
