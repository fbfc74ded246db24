"""Every upload and storage limit of SPEC section 6, with its unit in its name, and the checks using them.

`Limits` carries the values the service layer uses; its defaults are the SPEC values. Tests inject smaller
values so that real files stay tiny; the defaults' boundaries are tested in pure unit tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from media_worker.domain.errors import (
    InsufficientStorage,
    InvalidUpload,
    LayoutRefused,
    LengthRequired,
    UploadTooLarge,
)

__all__ = [
    "CHUNKED_REQUIRED_FROM_BYTES",
    "CHUNK_COUNT_MAX",
    "CHUNK_MAX_BYTES",
    "CHUNK_MIN_BYTES",
    "CHUNK_SLOT_WAIT_SECONDS",
    "FREE_SPACE_SAFETY_MARGIN_BYTES",
    "GIB",
    "MAX_CONCURRENT_CHUNK_WRITES",
    "MERGE_HEADROOM_BYTES",
    "MIB",
    "PLAIN_UPLOAD_MAX_BYTES",
    "PROTECTION_WINDOW",
    "SOURCE_MAX_BYTES",
    "Limits",
]

MIB = 1024 * 1024
GIB = 1024 * MIB

PLAIN_UPLOAD_MAX_BYTES = 128 * MIB  # whole multipart request, checked from Content-Length before parsing
CHUNKED_REQUIRED_FROM_BYTES = 5 * MIB  # a source of this size or more must use the chunked upload
CHUNK_MAX_BYTES = 20 * MIB
# Every chunk but the last has the declared size, at least this (the last one holds the rest, so a source
# of at most one chunk is one chunk, of any size): every session row and state answer lists the chunks, and
# this bounds them by the published limits alone, which JSON Schema can state (as S3's parts do).
CHUNK_MIN_BYTES = MIB
SOURCE_MAX_BYTES = 10 * GIB  # logical source size of a chunked upload
CHUNK_COUNT_MAX = -(-SOURCE_MAX_BYTES // CHUNK_MIN_BYTES)  # 10,240: the largest source in the smallest chunks
MAX_CONCURRENT_CHUNK_WRITES = 8
CHUNK_SLOT_WAIT_SECONDS = 5.0  # bounded wait for a chunk slot, then 429 `chunk_slots_busy`
FREE_SPACE_SAFETY_MARGIN_BYTES = 2 * GIB  # at init, on top of chunks + merged file
MERGE_HEADROOM_BYTES = 2 * GIB  # at merge: merged size + this must be free
PROTECTION_WINDOW = timedelta(days=15)  # the source location is never exposed during this window


@dataclass(frozen=True)
class Limits:
    plain_upload_max_bytes: int = PLAIN_UPLOAD_MAX_BYTES
    chunked_required_from_bytes: int = CHUNKED_REQUIRED_FROM_BYTES
    chunk_max_bytes: int = CHUNK_MAX_BYTES
    chunk_min_bytes: int = CHUNK_MIN_BYTES
    chunk_count_max: int = CHUNK_COUNT_MAX
    source_max_bytes: int = SOURCE_MAX_BYTES
    max_concurrent_chunk_writes: int = MAX_CONCURRENT_CHUNK_WRITES
    chunk_slot_wait_seconds: float = CHUNK_SLOT_WAIT_SECONDS
    free_space_safety_margin_bytes: int = FREE_SPACE_SAFETY_MARGIN_BYTES
    merge_headroom_bytes: int = MERGE_HEADROOM_BYTES

    def check_plain_request_length(self, content_length: str | None) -> int:
        """The declared length of a plain upload request, refused before any byte is parsed."""
        if content_length is None or not content_length.isascii() or not content_length.isdigit():
            raise LengthRequired()
        length = int(content_length)
        if length > self.plain_upload_max_bytes:
            raise UploadTooLarge("request_too_large")
        return length

    def check_plain_source_size(self, size_bytes: int) -> None:
        """Called while streaming: a plain source must stay below the chunked threshold."""
        if size_bytes >= self.chunked_required_from_bytes:
            raise UploadTooLarge("chunked_upload_required")

    def check_source_size(self, total_bytes: int) -> None:
        if total_bytes < 1:
            raise InvalidUpload("invalid_layout")
        if total_bytes > self.source_max_bytes:
            raise LayoutRefused("source_too_large")

    def check_chunk_size(self, chunk_bytes: int) -> None:
        if chunk_bytes < 1:
            raise InvalidUpload("invalid_layout")
        if chunk_bytes > self.chunk_max_bytes:
            raise LayoutRefused("chunk_bytes_too_large")
        if chunk_bytes < self.chunk_min_bytes:
            raise LayoutRefused("chunk_bytes_too_small")

    def check_chunk_count(self, total_bytes: int, chunk_bytes: int) -> None:
        if -(-total_bytes // chunk_bytes) > self.chunk_count_max:
            raise LayoutRefused("too_many_chunks")

    def check_init_free_space(self, total_bytes: int, free_bytes: int | None) -> None:
        """Room for every chunk, the merged file and the safety margin; unknown free space is a refusal."""
        if free_bytes is None:
            raise InsufficientStorage("free_space_unknown")
        if free_bytes < 2 * total_bytes + self.free_space_safety_margin_bytes:
            raise InsufficientStorage("insufficient_storage")

    def check_merge_free_space(self, total_bytes: int, free_bytes: int | None) -> None:
        """Before merging: "merged size + headroom" must be free; unknown free space is a refusal."""
        if free_bytes is None:
            raise InsufficientStorage("free_space_unknown")
        if free_bytes < total_bytes + self.merge_headroom_bytes:
            raise InsufficientStorage("insufficient_storage")
