from __future__ import annotations

import pytest

from media_worker.domain.errors import InvalidUpload, MediaRefusal
from media_worker.domain.layout import ChunkLayout
from media_worker.domain.limits import CHUNK_MAX_BYTES, SOURCE_MAX_BYTES, Limits

LIMITS = Limits(chunk_min_bytes=1)  # tiny layouts: the published minimum has its own tests (test_limits)


def test_layout_fixes_every_chunk_size_with_a_shorter_last_chunk() -> None:
    layout = ChunkLayout.plan(10, 4, LIMITS)
    assert layout.chunk_count == 3
    assert [layout.size_of(i) for i in range(3)] == [4, 4, 2]
    assert [layout.offset_of(i) for i in range(3)] == [0, 4, 8]


def test_layout_of_an_exact_multiple_has_no_short_chunk() -> None:
    layout = ChunkLayout.plan(12, 4, LIMITS)
    assert [layout.size_of(i) for i in range(layout.chunk_count)] == [4, 4, 4]


def test_largest_source_in_largest_chunks() -> None:
    layout = ChunkLayout.plan(SOURCE_MAX_BYTES, CHUNK_MAX_BYTES, LIMITS)
    assert layout.chunk_count == 512
    assert sum(layout.size_of(i) for i in range(layout.chunk_count)) == SOURCE_MAX_BYTES


@pytest.mark.parametrize(
    ("total", "chunk", "code"),
    [
        (SOURCE_MAX_BYTES + 1, CHUNK_MAX_BYTES, "source_too_large"),
        (100, CHUNK_MAX_BYTES + 1, "chunk_bytes_too_large"),
        (0, 4, "invalid_layout"),
        (10, 0, "invalid_layout"),
    ],
)
def test_layouts_outside_the_limits_are_refused(total: int, chunk: int, code: str) -> None:
    with pytest.raises(MediaRefusal) as caught:
        ChunkLayout.plan(total, chunk, LIMITS)
    assert caught.value.code == code


@pytest.mark.parametrize(("index", "size"), [(0, 3), (0, 5), (2, 4), (2, 1)])
def test_a_chunk_must_match_its_declared_size_exactly(index: int, size: int) -> None:
    layout = ChunkLayout.plan(10, 4, LIMITS)
    with pytest.raises(InvalidUpload) as caught:
        layout.check_chunk(index, size)
    assert caught.value.code == "chunk_size_mismatch"
    layout.check_chunk(index, layout.size_of(index))


@pytest.mark.parametrize("index", [-1, 3])
def test_chunk_index_outside_the_layout_is_refused(index: int) -> None:
    with pytest.raises(InvalidUpload) as caught:
        ChunkLayout.plan(10, 4, LIMITS).size_of(index)
    assert caught.value.code == "chunk_index_out_of_range"


def test_missing_chunks_are_listed_in_order() -> None:
    assert ChunkLayout.plan(10, 4, LIMITS).missing(frozenset({1})) == [0, 2]
