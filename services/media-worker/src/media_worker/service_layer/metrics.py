"""media-worker's Prometheus metrics; every label takes values from a fixed set only."""

from __future__ import annotations

import enum

from prometheus_client import CollectorRegistry

from media_worker.domain.errors import REFUSAL_CODES
from media_worker.service_layer.activity import Activity
from yovision_platform.observability import labeled_counter, labeled_gauge

__all__ = ["DisconnectedUpload", "MediaMetrics", "TranscodeOutcome"]


class TranscodeOutcome(enum.StrEnum):
    DONE = "done"
    FAILED = "failed"
    ABORTED = "aborted"  # lease lost or stop: nothing written


class DisconnectedUpload(enum.StrEnum):
    """Which request body a client stopped sending (an expected event, not an error)."""

    PLAIN = "plain"
    CHUNK = "chunk"
    OTHER = "other"


class WorkKind(enum.StrEnum):
    JOBS = "jobs"
    UPLOADS = "uploads"
    MERGES = "merges"


class MediaMetrics:
    def __init__(self, registry: CollectorRegistry, activity: Activity) -> None:
        self.transcodes = labeled_counter(
            registry, "media_transcodes_total", "Transcode attempts by outcome", {"outcome": TranscodeOutcome}
        )
        self.transcodes.initialize_all()
        self.refusals = labeled_counter(
            registry,
            "media_api_refusals_total",
            "API requests refused, by error code",
            {"code": REFUSAL_CODES},
        )
        self.client_disconnects = labeled_counter(
            registry,
            "media_client_disconnects_total",
            "Requests whose client went away before its body was read; the attempt's partial file is removed",
            {"upload": DisconnectedUpload},
        )
        self.client_disconnects.initialize_all()
        active = labeled_gauge(
            registry, "media_active_work", "Work in progress in this process", {"kind": WorkKind}
        )
        active.labels(kind=WorkKind.JOBS).set_function(lambda: activity.jobs)
        active.labels(kind=WorkKind.UPLOADS).set_function(lambda: activity.uploads)
        active.labels(kind=WorkKind.MERGES).set_function(lambda: activity.merges)
        draining = labeled_gauge(registry, "media_draining", "1 while this instance is draining", {})
        draining.labels().set_function(lambda: float(activity.draining))
