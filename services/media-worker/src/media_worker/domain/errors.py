"""media-worker's refusals: `ServiceError` subclasses, one per status and meaning, with stable codes.

    MediaRefusal(ServiceError)                      codes: the stable codes a class may carry
    ├── LengthRequired          411  length_required
    ├── UploadTooLarge          413  request_too_large | chunked_upload_required | chunk_too_large
    ├── LayoutRefused           422  source_too_large | chunk_bytes_too_large | chunk_bytes_too_small |
    │                                too_many_chunks
    ├── InvalidUpload           400  chunk_size_mismatch | chunk_checksum_mismatch |
    │                                chunk_index_out_of_range | invalid_layout | invalid_multipart
    ├── NotFound                404  not_found
    ├── UploadConflict          409  layout_conflict | upload_incomplete | upload_not_open
    ├── MergeInProgress         409  merge_in_progress   Retry-After: MERGE_RETRY_AFTER_SECONDS
    ├── NotRetryable            409  not_retryable
    ├── ChunkSlotsBusy          429  chunk_slots_busy    Retry-After: CHUNK_SLOTS_RETRY_AFTER_SECONDS
    ├── Draining                503  draining            Retry-After: DRAINING_RETRY_AFTER_SECONDS
    └── InsufficientStorage     507  free_space_unknown | insufficient_storage

A class of one code raises without arguments (`Draining()`); a family names its code
(`UploadTooLarge("source_too_large")`), and a code outside the family is a programming error. Codes are
never free text: they reach APIs, metrics (`REFUSAL_CODES`, with the platform's `invalid_cursor` of the
listing's cursor) and events.
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

from yovision_platform.errors import ServiceError
from yovision_platform.web import InvalidCursor

__all__ = [
    "CHUNK_SLOTS_RETRY_AFTER_SECONDS",
    "DRAINING_RETRY_AFTER_SECONDS",
    "MERGE_RETRY_AFTER_SECONDS",
    "REFUSALS",
    "REFUSAL_CODES",
    "ChunkSlotsBusy",
    "Draining",
    "InsufficientStorage",
    "InvalidUpload",
    "LayoutRefused",
    "LengthRequired",
    "MaterialNotFound",
    "MediaRefusal",
    "MergeInProgress",
    "NotRetryable",
    "UploadConflict",
    "UploadTooLarge",
]

T = TypeVar("T")

CHUNK_SLOTS_RETRY_AFTER_SECONDS = 2  # every chunk slot stayed busy for the bounded wait
MERGE_RETRY_AFTER_SECONDS = 5  # another request holds the merge slot
DRAINING_RETRY_AFTER_SECONDS = 30  # this instance drains: another one takes the upload


class MediaRefusal(ServiceError):
    """Base of every refusal media-worker answers; `codes` are the codes of the class."""

    codes: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "codes" not in cls.__dict__:
            cls.codes = frozenset({cls.code})

    def __init__(self, code: str | None = None) -> None:
        if code is None and len(self.codes) != 1:
            raise TypeError(f"{type(self).__name__} needs one of its codes")
        if code is not None and code not in self.codes:
            raise ValueError(f"{type(self).__name__} has no code {code!r}")
        super().__init__(code)


class LengthRequired(MediaRefusal):
    code = "length_required"
    status = 411


class UploadTooLarge(MediaRefusal):
    """Request content above its limit: a plain upload's request or source, a chunk's body (refused before
    the work it would need)."""

    status = 413
    codes = frozenset({"request_too_large", "chunked_upload_required", "chunk_too_large"})


class LayoutRefused(MediaRefusal):
    """A chunked upload's declared layout outside the limits the API publishes (its init request is small:
    the sizes it names are refused, not its content, so 422 and not 413)."""

    status = 422
    codes = frozenset(
        {"source_too_large", "chunk_bytes_too_large", "chunk_bytes_too_small", "too_many_chunks"}
    )


class InvalidUpload(MediaRefusal):
    """An upload body or layout that does not fit what was declared."""

    status = 400
    codes = frozenset(
        {
            "chunk_size_mismatch",
            "chunk_checksum_mismatch",
            "chunk_index_out_of_range",
            "invalid_layout",
            "invalid_multipart",
        }
    )


class MaterialNotFound(MediaRefusal):
    """No such material of the caller, upload session of one, or output of one (yet); another user's
    answers the same."""

    code = "not_found"
    status = 404

    @classmethod
    def unless_found(cls, value: T | None) -> T:
        """`value`, or this refusal when there is none."""
        if value is None:
            raise cls()
        return value


class UploadConflict(MediaRefusal):
    """The session's state does not allow the request (another layout, chunks missing, no longer open)."""

    status = 409
    codes = frozenset({"layout_conflict", "upload_incomplete", "upload_not_open"})


class MergeInProgress(MediaRefusal):
    code = "merge_in_progress"
    status = 409
    retry_after = MERGE_RETRY_AFTER_SECONDS


class NotRetryable(MediaRefusal):
    code = "not_retryable"
    status = 409


class ChunkSlotsBusy(MediaRefusal):
    code = "chunk_slots_busy"
    status = 429
    retry_after = CHUNK_SLOTS_RETRY_AFTER_SECONDS


class Draining(MediaRefusal):
    code = "draining"
    status = 503
    retry_after = DRAINING_RETRY_AFTER_SECONDS


class InsufficientStorage(MediaRefusal):
    """Not enough free space for the upload or merge, or the free space is unknown."""

    status = 507
    codes = frozenset({"free_space_unknown", "insufficient_storage"})


REFUSALS: tuple[type[MediaRefusal], ...] = (
    LengthRequired,
    UploadTooLarge,
    LayoutRefused,
    InvalidUpload,
    MaterialNotFound,
    UploadConflict,
    MergeInProgress,
    NotRetryable,
    ChunkSlotsBusy,
    Draining,
    InsufficientStorage,
)
# Every code a route refuses with: these classes' and the listing cursor's (`yovision_platform.web`).
REFUSAL_CODES: frozenset[str] = frozenset({InvalidCursor.code}).union(
    *(refusal.codes for refusal in REFUSALS)
)
