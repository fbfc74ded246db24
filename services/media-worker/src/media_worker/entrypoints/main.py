"""Composition root of media-worker: `media-worker serve | migrate | check-config`."""

from __future__ import annotations

import functools
import sys

from media_worker.adapters.capability import CapabilityFile
from media_worker.adapters.ffmpeg import FfmpegTools
from media_worker.adapters.locks import AdvisoryLocks
from media_worker.adapters.storage import LocalStorage
from media_worker.adapters.unit_of_work import PostgresMediaUnitOfWork
from media_worker.domain.errors import InsufficientStorage
from media_worker.entrypoints.api import MediaApi, install_routes, set_upload_body_rule
from media_worker.service_layer.activity import Activity
from media_worker.service_layer.drain import Drain
from media_worker.service_layer.events import EventWriter
from media_worker.service_layer.materials import Materials
from media_worker.service_layer.metrics import MediaMetrics
from media_worker.service_layer.transcoder import TranscodeWorker, WorkerTiming
from media_worker.service_layer.uploads import UploadService
from media_worker.settings import MediaWorkerSettings
from yovision_platform.access_tokens import use_access_tokens
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.service import ServiceContext, ServiceSpec
from yovision_platform.service import main as run

__all__ = ["SPEC", "main"]


async def configure(ctx: ServiceContext[MediaWorkerSettings]) -> None:
    settings = ctx.settings
    uow = functools.partial(PostgresMediaUnitOfWork, ctx.pool, ctx.plan.schema)
    locks = AdvisoryLocks(ctx.pool, ctx.plan.schema)
    storage = LocalStorage(settings.storage_dir)
    events = EventWriter(AvroSerde(SchemaRegistry.load()))
    activity = Activity()
    metrics = MediaMetrics(ctx.registry, activity)
    worker = TranscodeWorker(
        uow,
        locks,
        storage,
        events,
        activity,
        FfmpegTools(settings.ffmpeg_path, settings.ffprobe_path),
        instance_id=settings.instance_id,
        timing=WorkerTiming(settings.job_lease_seconds, settings.rescan_seconds),
        metrics=metrics,
    )
    uploads = UploadService(
        uow, locks, storage, events, activity, instance_id=settings.instance_id, job_queued=worker.wake.set
    )
    drain = Drain(uow, activity, CapabilityFile(settings.capability_file), instance_id=settings.instance_id)
    await drain.register()
    materials = Materials(uow, storage, job_queued=worker.wake.set)
    use_access_tokens(ctx)
    install_routes(ctx.app, MediaApi(uploads, materials, drain, metrics))
    set_upload_body_rule(ctx.app, settings.upload_body_rule)

    async def storage_ready() -> None:
        if storage.free_bytes() is None:
            raise InsufficientStorage("free_space_unknown")

    ctx.add_readiness_check("storage", storage_ready)
    ctx.add_worker("transcode", worker.run)


SPEC = ServiceSpec.for_package(
    "media-worker",
    package="media_worker",
    schema="media",
    settings_cls=MediaWorkerSettings,
    configure=configure,
)


def main() -> None:
    sys.exit(run(SPEC))
