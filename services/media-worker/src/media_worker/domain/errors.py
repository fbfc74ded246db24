"""media-worker's domain errors: one class, a stable snake_case code and the HTTP status it maps to.

MediaError(PlatformError)   code = one of the codes below, .status = HTTP status
"""

from __future__ import annotations

from yovision_platform.errors import PlatformError

__all__ = ["MediaError"]

# Stable codes and their HTTP statuses. Never free text: these reach APIs, metrics and events.
STATUS_BY_CODE: dict[str, int] = {
    "length_required": 411,
    "request_too_large": 413,
    "chunked_upload_required": 413,
    "source_too_large": 413,
    "chunk_too_large": 413,
    "too_many_chunks": 413,
    "chunk_size_mismatch": 400,
    "chunk_checksum_mismatch": 400,
    "chunk_index_out_of_range": 400,
    "invalid_layout": 400,
    "invalid_multipart": 400,
    "layout_conflict": 409,
    "upload_incomplete": 409,
    "upload_not_open": 409,
    "merge_in_progress": 409,
    "not_retryable": 409,
    "draining": 503,
    "chunk_slots_busy": 429,
    "free_space_unknown": 507,
    "insufficient_storage": 507,
    "not_found": 404,
    "invalid_cursor": 400,
}


class MediaError(PlatformError):
    code = "media_error"

    def __init__(self, code: str, detail: str | None = None) -> None:
        if code not in STATUS_BY_CODE:
            raise ValueError(f"unknown media error code {code!r}")
        super().__init__(code, detail)

    @property
    def status(self) -> int:
        return STATUS_BY_CODE[self.code]
