"""The fixed chunk layout of a chunked upload: total size and chunk size decide every chunk's exact size."""

from __future__ import annotations

from dataclasses import dataclass

from media_worker.domain.errors import InvalidUpload
from media_worker.domain.limits import Limits

__all__ = ["ChunkLayout"]


@dataclass(frozen=True)
class ChunkLayout:
    total_bytes: int
    chunk_bytes: int

    @classmethod
    def plan(cls, total_bytes: int, chunk_bytes: int, limits: Limits) -> ChunkLayout:
        """A layout within `limits`; InvalidUpload(invalid_layout) or
        LayoutRefused(source_too_large | chunk_bytes_too_large | chunk_bytes_too_small | too_many_chunks)."""
        limits.check_source_size(total_bytes)
        limits.check_chunk_size(chunk_bytes)
        limits.check_chunk_count(total_bytes, chunk_bytes)
        return cls(total_bytes, chunk_bytes)

    @property
    def chunk_count(self) -> int:
        return -(-self.total_bytes // self.chunk_bytes)

    def size_of(self, index: int) -> int:
        """Exact size of chunk `index` (0-based): `chunk_bytes`, except a shorter last chunk."""
        if not 0 <= index < self.chunk_count:
            raise InvalidUpload("chunk_index_out_of_range")
        if index < self.chunk_count - 1:
            return self.chunk_bytes
        return self.total_bytes - self.chunk_bytes * (self.chunk_count - 1)

    def offset_of(self, index: int) -> int:
        self.size_of(index)
        return index * self.chunk_bytes

    def check_chunk(self, index: int, received_bytes: int) -> None:
        if received_bytes != self.size_of(index):
            raise InvalidUpload("chunk_size_mismatch")

    def missing(self, received: frozenset[int]) -> list[int]:
        return [i for i in range(self.chunk_count) if i not in received]
