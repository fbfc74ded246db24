"""Materials: their states and the transitions between them, the protection window, the stored record."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from media_worker.domain.limits import PROTECTION_WINDOW

__all__ = [
    "Material",
    "MaterialStatus",
    "NewMaterial",
    "UploadMode",
    "can_transition",
    "protection_until",
    "source_exposable",
]


class MaterialStatus(enum.StrEnum):
    PENDING = "pending"
    PROCESSING = "processing"
    DONE = "done"
    FAILED = "failed"


class UploadMode(enum.StrEnum):
    MULTIPART = "multipart"
    CHUNKED = "chunked"


_ALLOWED: dict[MaterialStatus, frozenset[MaterialStatus]] = {
    # processing -> pending: a lease was released (drain, stop) before the job finished.
    MaterialStatus.PENDING: frozenset({MaterialStatus.PROCESSING}),
    MaterialStatus.PROCESSING: frozenset(
        {MaterialStatus.PENDING, MaterialStatus.PROCESSING, MaterialStatus.DONE, MaterialStatus.FAILED}
    ),
    MaterialStatus.FAILED: frozenset({MaterialStatus.PENDING}),  # retry
    MaterialStatus.DONE: frozenset(),
}


def can_transition(current: MaterialStatus, target: MaterialStatus) -> bool:
    return target in _ALLOWED[current]


def protection_until(created_at: datetime) -> datetime:
    return created_at + PROTECTION_WINDOW


def source_exposable(created_at: datetime, now: datetime) -> bool:
    """The source location may appear in an API response only after the protection window."""
    return now >= protection_until(created_at)


@dataclass(frozen=True)
class NewMaterial:
    """A stored source about to be recorded (with its transcode job and `MaterialUploaded`)."""

    material_id: uuid.UUID
    owner: str
    title: str
    upload_mode: UploadMode
    source_key: str
    size_bytes: int
    sha256: str
    content_type: str | None


@dataclass(frozen=True)
class Material(NewMaterial):
    """A recorded material: what its upload recorded, and where its transcode stands."""

    status: MaterialStatus
    progress: int
    error_code: str | None
    outputs: Mapping[str, str]  # output kind -> storage key, for the outputs recorded so far
    created_at: datetime
    protection_until: datetime
    read_at: datetime  # the store's clock when this was read: the protection window is judged by it

    @property
    def shown_source_key(self) -> str | None:
        """The source location as an API may show it: hidden (None) during the protection window."""
        return self.source_key if source_exposable(self.created_at, self.read_at) else None
