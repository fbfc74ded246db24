from __future__ import annotations

import asyncio
import functools
import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from media_worker.adapters.capability import CapabilityFile
from media_worker.adapters.ffmpeg import FfmpegTools
from media_worker.adapters.locks import AdvisoryLocks
from media_worker.adapters.storage import FreeSpaceProbe, LocalStorage
from media_worker.adapters.unit_of_work import PostgresMediaUnitOfWork
from media_worker.bootstrap import MediaUseCases, UseCaseTimings, bootstrap
from media_worker.domain.limits import MIB, Limits
from media_worker.entrypoints.api import DRAIN_PERMISSION, include_api
from media_worker.service_layer.activity import Activity
from media_worker.service_layer.metrics import MediaMetrics
from media_worker.service_layer.ports import UnitOfWorkFactory
from media_worker.service_layer.transcoder import Transcoder
from media_worker.settings import AUDIENCE
from tests.support.issuers import LocalIssuer
from tests.support.media_uploads import SMALL_LIMITS
from tests.support.postgres import migrated_schema_fixture, runtime_pool_fixture
from tests.support.stack import MigratedSchema
from yovision_platform.messaging import AvroSerde, SchemaRegistry
from yovision_platform.storage import Identifier
from yovision_platform.tools.sample_video import make_sample_video as make_test_video
from yovision_platform.web import create_app, use_access_token_verifier

MIGRATIONS = Path(__file__).resolve().parents[2] / "services/media-worker/src/media_worker/migrations"
INSTANCE = "media-test-a"
TEST_LIMITS = SMALL_LIMITS
# The same, but letting a small generated video through the plain upload.
VIDEO_LIMITS = replace(TEST_LIMITS, plain_upload_max_bytes=64 * MIB, chunked_required_from_bytes=32 * MIB)
PLENTY_FREE_BYTES = 10 * MIB
# The OpenID provider of the in-process app (`build_app`): one for the session, its key made once.
ISSUER = LocalIssuer()


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="session")
def sample_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2 s 320x240 test video."""
    return make_test_video(
        tmp_path_factory.mktemp("video") / "sample.mp4", seconds=2, size="320x240", rate=15
    )


media_schema = migrated_schema_fixture(MIGRATIONS, name="media_schema")
pool = runtime_pool_fixture("media_schema", name="pool", max_size=8)


@dataclass
class FreeSpace:
    free: int | None = PLENTY_FREE_BYTES

    def __call__(self) -> int | None:
        return self.free


@dataclass
class Media:
    pool: asyncpg.Pool
    schema: Identifier
    uow: UnitOfWorkFactory
    locks: AdvisoryLocks
    storage: LocalStorage
    free_space: FreeSpace
    activity: Activity
    use_cases: MediaUseCases
    capability_file: Path

    def use_cases_of(
        self, settings: UseCaseTimings, ffmpeg: str = "ffmpeg", limits: Limits = TEST_LIMITS
    ) -> MediaUseCases:
        """The use cases on this schema and storage (`ffmpeg`: the ffmpeg program the transcoder runs)."""
        return bootstrap(
            settings,
            uow=self.uow,
            locks=self.locks,
            storage=self.storage,
            tools=FfmpegTools(ffmpeg, "ffprobe"),
            capability=CapabilityFile(self.capability_file),
            serde=AvroSerde(SchemaRegistry.load()),
            activity=self.activity,
            limits=limits,
        )

    def worker(
        self,
        ffmpeg: str = "ffmpeg",
        *,
        instance_id: str = INSTANCE,
        lease_seconds: float = 30.0,
        rescan_seconds: float = 0.5,
    ) -> Transcoder:
        """The transcode use case of an instance `instance_id`, running `ffmpeg`."""
        return self.use_cases_of(
            UseCaseTimings(instance_id, lease_seconds, rescan_seconds), ffmpeg
        ).transcoder

    def auth(self, subject: str = "user-1", *permissions: str, audience: str = AUDIENCE) -> dict[str, str]:
        """The headers of `subject`'s access token from `ISSUER`, for `audience` (default this service)."""
        return {"Authorization": f"Bearer {ISSUER.token(subject, *permissions, audience=audience)}"}

    @property
    def operator(self) -> dict[str, str]:
        return self.auth("ops", DRAIN_PERMISSION)

    async def fetchrow(self, sql: str, *args: object) -> asyncpg.Record:
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(sql.replace("{s}", self.schema), *args)
        assert row is not None
        return row

    async def fetch(self, sql: str, *args: object) -> list[asyncpg.Record]:
        async with self.pool.acquire() as conn:
            return list(await conn.fetch(sql.replace("{s}", self.schema), *args))


async def partial_files_written(media: Media, count: int, within_seconds: float = 10.0) -> None:
    """Wait until ``count`` chunk attempts hold a slot and have written into their partial files."""
    deadline = time.monotonic() + within_seconds
    while len(list(media.storage.root.rglob("*.partial"))) < count:
        assert time.monotonic() < deadline, f"{count} partial file(s) never appeared"
        await asyncio.sleep(0.02)


def build_media(pool: asyncpg.Pool, schema: Identifier, root: Path, limits: Limits = TEST_LIMITS) -> Media:
    free_space = FreeSpace()
    probe: FreeSpaceProbe = free_space
    storage = LocalStorage(root / "storage", probe)
    placeholder: Any = None  # the use cases are made below, on these adapters
    media = Media(
        pool,
        schema,
        functools.partial(PostgresMediaUnitOfWork, pool, schema),
        AdvisoryLocks(pool, schema),
        storage,
        free_space,
        Activity(),
        placeholder,
        root / "capability",
    )
    media.use_cases = media.use_cases_of(UseCaseTimings(INSTANCE), limits=limits)
    return media


@pytest.fixture
def media(pool: asyncpg.Pool, media_schema: MigratedSchema, tmp_path: Path) -> Media:
    return build_media(pool, media_schema.name, tmp_path)


def build_app(media: Media, metrics: MediaMetrics | None = None) -> FastAPI:
    app = create_app("media-worker", "test")
    include_api(app, media.use_cases, metrics)
    use_access_token_verifier(app, ISSUER.verifier(AUDIENCE))
    return app


@pytest.fixture
async def client(media: Media) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=build_app(media))
    async with httpx.AsyncClient(transport=transport, base_url="http://media.test") as http:
        yield http
