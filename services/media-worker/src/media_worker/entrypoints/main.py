"""Composition root of media-worker: `media-worker serve | migrate | check-config`."""

from __future__ import annotations

import asyncio
import functools
import sys

from media_worker.adapters.capability import CapabilityFile
from media_worker.adapters.ffmpeg import FfmpegTools
from media_worker.adapters.locks import AdvisoryLocks
from media_worker.adapters.storage import LocalStorage
from media_worker.adapters.unit_of_work import PostgresMediaUnitOfWork
from media_worker.bootstrap import bootstrap
from media_worker.domain.errors import InsufficientStorage
from media_worker.entrypoints.api import include_api, set_upload_body_rule
from media_worker.entrypoints.transcode_worker import TranscodeWorker
from media_worker.service_layer.activity import Activity
from media_worker.service_layer.metrics import MediaMetrics
from media_worker.settings import MediaWorkerSettings
from yovision_platform.messaging import AvroSerde, SchemaRegistry
from yovision_platform.web import ServiceContext, ServiceSpec, use_access_tokens
from yovision_platform.web import main as run

__all__ = ["SPEC", "main"]


async def configure(ctx: ServiceContext[MediaWorkerSettings]) -> None:
    settings = ctx.settings
    storage = LocalStorage(settings.storage_dir)
    activity = Activity()
    metrics = MediaMetrics(ctx.registry, activity)
    transcode_woken = asyncio.Event()
    use_cases = bootstrap(
        settings,
        uow=functools.partial(PostgresMediaUnitOfWork, ctx.pool, ctx.plan.schema),
        locks=AdvisoryLocks(ctx.pool, ctx.plan.schema),
        storage=storage,
        tools=FfmpegTools(settings.ffmpeg_path, settings.ffprobe_path),
        capability=CapabilityFile(settings.capability_file),
        serde=AvroSerde(SchemaRegistry.load()),
        activity=activity,
        metrics=metrics,
        job_queued=transcode_woken.set,
    )
    await use_cases.drain.register()
    use_access_tokens(ctx)
    include_api(ctx.app, use_cases, metrics)
    set_upload_body_rule(ctx.app, settings.upload_body_rule)

    async def storage_ready() -> None:
        if storage.free_bytes() is None:
            raise InsufficientStorage("free_space_unknown")

    ctx.add_readiness_check("storage", storage_ready)
    ctx.add_worker("transcode", TranscodeWorker(use_cases.transcoder, woken=transcode_woken).run)


SPEC = ServiceSpec.for_package(
    "media-worker",
    package="media_worker",
    schema="media",
    settings_cls=MediaWorkerSettings,
    configure=configure,
)


def main() -> None:
    sys.exit(run(SPEC))
