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
    ManualClock,
    MemoryCapability,
    MemoryLocks,
    MemoryMedia,
    MemoryMediaTools,
    MemoryStorage,
)
from media_worker.bootstrap import MediaUseCases, UseCaseTimings, bootstrap
from media_worker.domain.keys import source_key
from media_worker.domain.limits import Limits
from media_worker.domain.material import Material
from media_worker.entrypoints.api import DRAIN_PERMISSION, include_api
from media_worker.service_layer.activity import Activity
from media_worker.service_layer.metrics import MediaMetrics
from media_worker.service_layer.ports import MediaUnitOfWork
from media_worker.service_layer.transcoder import Transcoder
from media_worker.settings import AUDIENCE
from tests.support.issuers import LocalIssuer
from tests.support.media_uploads import SMALL_LIMITS
from yovision_platform.messaging import AvroSerde, SchemaRegistry
from yovision_platform.web import create_app, use_access_token_verifier

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
    db: MemoryMedia
    locks: MemoryLocks
    storage: MemoryStorage
    tools: MemoryMediaTools
    capability: MemoryCapability
    activity: Activity
    use_cases: MediaUseCases
    registry: CollectorRegistry
    metrics: MediaMetrics
    woken: list[str] = field(default_factory=list)

    def use_cases_of(self, settings: UseCaseTimings, limits: Limits = TEST_LIMITS) -> MediaUseCases:
        """The use cases on these fakes (a job queued is noted in `woken`)."""
        return bootstrap(
            settings,
            uow=self.db.unit_of_work,
            locks=self.locks,
            storage=self.storage,
            tools=self.tools,
            capability=self.capability,
            serde=serde(),
            activity=self.activity,
            metrics=self.metrics,
            job_queued=lambda: self.woken.append("job"),
            limits=limits,
        )

    def worker(
        self, *, instance_id: str = INSTANCE, lease_seconds: float = 30.0, rescan_seconds: float = 60.0
    ) -> Transcoder:
        """The transcode use case of an instance `instance_id` on these fakes."""
        return self.use_cases_of(UseCaseTimings(instance_id, lease_seconds, rescan_seconds)).transcoder

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
        return await self.use_cases.materials.status(owner, material_id)

    async def upload(self, data: bytes = VIDEO, owner: str = OWNER) -> uuid.UUID:
        return await self.use_cases.uploads.upload_plain(
            owner, "clip", "video/mp4", body_of(data), request_length="100"
        )

    def source(self, material_id: uuid.UUID) -> bytes:
        return self.storage.files[source_key(material_id)]

    def app(self) -> FastAPI:
        app = create_app("media-worker", "test")
        include_api(app, self.use_cases, self.metrics)
        use_access_token_verifier(app, ISSUER.verifier(AUDIENCE))
        return app


def build_fakes(limits: Limits = TEST_LIMITS) -> Fakes:
    clock = ManualClock()
    storage, activity, registry = MemoryStorage(PLENTY_FREE_BYTES), Activity(), CollectorRegistry()
    placeholder: Any = None  # the use cases are made below, on these fakes
    fakes = Fakes(
        clock,
        MemoryMedia(clock),
        MemoryLocks(),
        storage,
        MemoryMediaTools(storage),
        MemoryCapability(),
        activity,
        placeholder,
        registry,
        MediaMetrics(registry, activity),
    )
    fakes.use_cases = fakes.use_cases_of(UseCaseTimings(INSTANCE), limits)
    return fakes


@pytest.fixture
def fakes() -> Fakes:
    return build_fakes()


@pytest.fixture
async def client(fakes: Fakes) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=fakes.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://media.test") as http:
        yield http
