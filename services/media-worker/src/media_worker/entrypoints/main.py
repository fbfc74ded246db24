"""Composition root of media-worker: `media-worker serve | migrate | check-config`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from media_worker.adapters.ffmpeg import FfmpegTools
from media_worker.adapters.repository import MediaRepository
from media_worker.adapters.storage import LocalStorage
from media_worker.domain.errors import InsufficientStorage
from media_worker.entrypoints.api import MediaApi, install_routes, set_upload_body_rule
from media_worker.service_layer.activity import Activity
from media_worker.service_layer.events import EventWriter
from media_worker.service_layer.metrics import MediaMetrics
from media_worker.service_layer.transcoder import TranscodeWorker, WorkerTiming
from media_worker.service_layer.uploads import UploadService
from media_worker.settings import MediaWorkerSettings
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.outbox import Outbox
from yovision_platform.service import ServiceContext, ServiceSpec
from yovision_platform.service import main as run

__all__ = ["SPEC", "main", "publish_capability"]


def publish_capability(path: Path, instance_id: str) -> None:
    """Write this instance's capability (its own id) atomically; the drain check compares against it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps({"instance_id": instance_id, "pid": os.getpid()}), encoding="utf-8")
    os.replace(partial, path)


async def configure(ctx: ServiceContext[MediaWorkerSettings]) -> None:
    settings = ctx.settings
    repo = MediaRepository(ctx.plan.schema)
    storage = LocalStorage(settings.storage_dir)
    events = EventWriter(AvroSerde(SchemaRegistry.load()), Outbox(ctx.plan.schema))
    activity = Activity()
    metrics = MediaMetrics(ctx.registry, activity)
    worker = TranscodeWorker(
        ctx.pool,
        repo,
        storage,
        events,
        activity,
        FfmpegTools(settings.ffmpeg_path, settings.ffprobe_path),
        instance_id=settings.instance_id,
        timing=WorkerTiming(settings.job_lease_seconds, settings.rescan_seconds),
        metrics=metrics,
    )
    uploads = UploadService(
        ctx.pool,
        repo,
        storage,
        events,
        activity,
        instance_id=settings.instance_id,
        job_queued=worker.wake.set,
    )
    async with ctx.pool.acquire() as conn:
        await repo.register_instance(conn, settings.instance_id)
    publish_capability(settings.capability_file, settings.instance_id)
    install_routes(
        ctx.app,
        MediaApi(
            ctx.pool,
            repo,
            storage,
            uploads,
            activity,
            settings.token_verifier,
            settings.instance_id,
            settings.capability_file,
            metrics,
            worker.wake.set,
        ),
    )

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
