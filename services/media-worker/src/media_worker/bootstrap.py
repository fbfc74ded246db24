"""Composition root of media-worker's use cases: `bootstrap` takes the dependencies (units of work, locks,
storage, the media tools, the capability file, the Avro serde, this process's activity, the metrics, what
wakes the transcode worker) and returns the use cases. Production (`entrypoints/main.py`) passes the real
adapters, tests and the bench the fakes of `adapters/memory.py`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from media_worker.domain.limits import Limits
from media_worker.service_layer.activity import Activity
from media_worker.service_layer.dependencies import InstanceDependencies
from media_worker.service_layer.drain import Drain
from media_worker.service_layer.events import EventWriter
from media_worker.service_layer.materials import Materials
from media_worker.service_layer.metrics import MediaMetrics
from media_worker.service_layer.ports import Capability, MediaLocks, MediaTools, Storage, UnitOfWorkFactory
from media_worker.service_layer.transcoder import JOB_LEASE_SECONDS, RESCAN_SECONDS, Transcoder, WorkerTiming
from media_worker.service_layer.uploads import Uploads
from yovision_platform.messaging import AvroSerde

__all__ = ["MediaUseCaseSettings", "MediaUseCases", "UseCaseTimings", "bootstrap"]


class MediaUseCaseSettings(Protocol):
    """What the use cases read of the settings (`MediaWorkerSettings` has it)."""

    @property
    def instance_id(self) -> str: ...

    @property
    def job_lease_seconds(self) -> float: ...

    @property
    def rescan_seconds(self) -> float: ...


@dataclass(frozen=True)
class UseCaseTimings:
    """`MediaUseCaseSettings` without the environment (tests, the bench)."""

    instance_id: str
    job_lease_seconds: float = JOB_LEASE_SECONDS
    rescan_seconds: float = RESCAN_SECONDS


@dataclass(frozen=True)
class MediaUseCases:
    uploads: Uploads  # the API's
    materials: Materials  # the API's
    drain: Drain  # the API's and start-up's (`register`)
    transcoder: Transcoder  # the transcode worker's


def bootstrap(
    settings: MediaUseCaseSettings,
    *,
    uow: UnitOfWorkFactory,
    locks: MediaLocks,
    storage: Storage,
    tools: MediaTools,
    capability: Capability,
    serde: AvroSerde,
    activity: Activity,
    metrics: MediaMetrics | None = None,
    job_queued: Callable[[], None] | None = None,
    limits: Limits | None = None,
) -> MediaUseCases:
    """`activity`: what this process is doing (the metrics read it too); `job_queued`: wakes the transcode
    worker (an upload or a retry queued a job)."""
    instance = InstanceDependencies(uow, locks, storage, EventWriter(serde), activity, settings.instance_id)
    return MediaUseCases(
        uploads=Uploads(instance, limits=limits, job_queued=job_queued),
        materials=Materials(uow, storage, job_queued=job_queued),
        drain=Drain(uow, activity, capability, instance_id=settings.instance_id),
        transcoder=Transcoder(
            instance,
            tools,
            timing=WorkerTiming(settings.job_lease_seconds, settings.rescan_seconds),
            metrics=metrics,
        ),
    )
