"""A chunked upload session: its fixed layout, the chunks received, and its state."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, replace

from media_worker.domain.layout import ChunkLayout

__all__ = ["SessionState", "UploadSession"]


class SessionState(enum.StrEnum):
    OPEN = "open"
    MERGING = "merging"  # one request merges its chunks (the merge slot)
    COMPLETED = "completed"


@dataclass(frozen=True)
class UploadSession:
    session_id: uuid.UUID
    owner: str
    upload_key: str  # the client's resume key, unique per owner
    layout: ChunkLayout
    material_id: uuid.UUID  # fixed at init, so a merge retry targets the same file
    title: str = ""
    content_type: str | None = None
    received: frozenset[int] = frozenset()
    state: SessionState = SessionState.OPEN
    trace_parent: str | None = None  # the W3C context of the request that opened it

    @property
    def missing(self) -> list[int]:
        return self.layout.missing(self.received)

    def with_chunk(self, index: int) -> UploadSession:
        return replace(self, received=self.received | {index})
