from __future__ import annotations

import pytest

from media_worker.domain.errors import MediaRefusal
from media_worker.domain.layout import ChunkLayout
from media_worker.domain.limits import (
    CHUNK_COUNT_MAX,
    CHUNK_MAX_BYTES,
    CHUNK_MIN_BYTES,
    CHUNKED_REQUIRED_FROM_BYTES,
    FREE_SPACE_SAFETY_MARGIN_BYTES,
    GIB,
    MAX_CONCURRENT_CHUNK_WRITES,
    MERGE_HEADROOM_BYTES,
    MIB,
    PLAIN_UPLOAD_MAX_BYTES,
    PROTECTION_WINDOW,
    SOURCE_MAX_BYTES,
    Limits,
)

LIMITS = Limits()
ANY_CHUNK = Limits(chunk_min_bytes=1)  # the chunk count's own check, below the published minimum


def code_of(call: object) -> str:
    assert callable(call)
    with pytest.raises(MediaRefusal) as caught:
        call()
    return caught.value.code


def test_spec_values() -> None:
    assert PLAIN_UPLOAD_MAX_BYTES == 128 * MIB
    assert CHUNKED_REQUIRED_FROM_BYTES == 5 * MIB
    assert CHUNK_MAX_BYTES == 20 * MIB
    assert SOURCE_MAX_BYTES == 10 * GIB
    assert MAX_CONCURRENT_CHUNK_WRITES == 8
    assert MERGE_HEADROOM_BYTES == 2 * GIB
    assert PROTECTION_WINDOW.days == 15
    assert Limits().max_concurrent_chunk_writes == 8


@pytest.mark.parametrize("length", [0, PLAIN_UPLOAD_MAX_BYTES - 1, PLAIN_UPLOAD_MAX_BYTES])
def test_plain_request_up_to_128_mib_is_accepted(length: int) -> None:
    assert LIMITS.check_plain_request_length(str(length)) == length


def test_plain_request_one_byte_over_128_mib_is_refused() -> None:
    assert code_of(lambda: LIMITS.check_plain_request_length(str(PLAIN_UPLOAD_MAX_BYTES + 1))) == (
        "request_too_large"
    )


@pytest.mark.parametrize("header", [None, "", "-1", "12a", "١٢"])
def test_plain_request_without_a_valid_length_is_refused(header: str | None) -> None:
    assert code_of(lambda: LIMITS.check_plain_request_length(header)) == "length_required"


def test_plain_source_below_5_mib_is_accepted() -> None:
    LIMITS.check_plain_source_size(CHUNKED_REQUIRED_FROM_BYTES - 1)


@pytest.mark.parametrize("size", [CHUNKED_REQUIRED_FROM_BYTES, CHUNKED_REQUIRED_FROM_BYTES + 1])
def test_plain_source_of_5_mib_or_more_must_be_chunked(size: int) -> None:
    assert code_of(lambda: LIMITS.check_plain_source_size(size)) == "chunked_upload_required"


@pytest.mark.parametrize("size", [CHUNK_MIN_BYTES, CHUNK_MIN_BYTES + 1, CHUNK_MAX_BYTES - 1, CHUNK_MAX_BYTES])
def test_chunks_of_1_to_20_mib_are_accepted(size: int) -> None:
    LIMITS.check_chunk_size(size)


def test_chunk_over_20_mib_is_refused() -> None:
    assert code_of(lambda: LIMITS.check_chunk_size(CHUNK_MAX_BYTES + 1)) == "chunk_bytes_too_large"


@pytest.mark.parametrize("size", [1, CHUNK_MIN_BYTES - 1])
def test_chunk_under_1_mib_is_refused(size: int) -> None:
    assert code_of(lambda: LIMITS.check_chunk_size(size)) == "chunk_bytes_too_small"


def test_the_published_limits_bound_the_chunk_count() -> None:
    """The smallest chunks of the largest source: no layout the schema allows has more chunks."""
    assert CHUNK_COUNT_MAX == 10_240
    assert ChunkLayout.plan(SOURCE_MAX_BYTES, CHUNK_MIN_BYTES, LIMITS).chunk_count == CHUNK_COUNT_MAX


@pytest.mark.parametrize(
    ("total_bytes", "chunk_bytes"),
    [(CHUNK_COUNT_MAX - 1, 1), (CHUNK_COUNT_MAX, 1), (CHUNK_COUNT_MAX * 1000, 1000), (SOURCE_MAX_BYTES, MIB)],
)
def test_up_to_10240_chunks_is_a_layout(total_bytes: int, chunk_bytes: int) -> None:
    assert ChunkLayout.plan(total_bytes, chunk_bytes, ANY_CHUNK).chunk_count <= CHUNK_COUNT_MAX


@pytest.mark.parametrize(
    ("total_bytes", "chunk_bytes"),
    [
        (CHUNK_COUNT_MAX + 1, 1),
        (CHUNK_COUNT_MAX * 1000 + 1, 1000),
        (SOURCE_MAX_BYTES - 1, 1),
        (SOURCE_MAX_BYTES, MIB - 1),
    ],
)
def test_more_than_10240_chunks_is_refused_before_any_row(total_bytes: int, chunk_bytes: int) -> None:
    """Ten billion 1-byte chunks of a 10 GiB source once reached PostgreSQL (int4 overflow: a 500)."""
    assert code_of(lambda: ChunkLayout.plan(total_bytes, chunk_bytes, ANY_CHUNK)) == "too_many_chunks"


@pytest.mark.parametrize("size", [1, SOURCE_MAX_BYTES - 1, SOURCE_MAX_BYTES])
def test_source_up_to_10_gib_is_accepted(size: int) -> None:
    LIMITS.check_source_size(size)


def test_source_over_10_gib_is_refused() -> None:
    assert code_of(lambda: LIMITS.check_source_size(SOURCE_MAX_BYTES + 1)) == "source_too_large"


def test_empty_source_is_refused() -> None:
    assert code_of(lambda: LIMITS.check_source_size(0)) == "invalid_layout"


def test_init_free_space_needs_chunks_merged_file_and_margin() -> None:
    total = 3 * GIB
    needed = 2 * total + FREE_SPACE_SAFETY_MARGIN_BYTES
    LIMITS.check_init_free_space(total, needed)
    LIMITS.check_init_free_space(total, needed + 1)
    assert code_of(lambda: LIMITS.check_init_free_space(total, needed - 1)) == "insufficient_storage"


def test_unknown_free_space_is_a_refusal() -> None:
    assert code_of(lambda: LIMITS.check_init_free_space(1, None)) == "free_space_unknown"
    assert code_of(lambda: LIMITS.check_merge_free_space(1, None)) == "free_space_unknown"


def test_merge_needs_merged_size_plus_2_gib() -> None:
    total = 7 * GIB
    LIMITS.check_merge_free_space(total, total + 2 * GIB)
    LIMITS.check_merge_free_space(total, total + 2 * GIB + 1)
    short = total + 2 * GIB - 1
    assert code_of(lambda: LIMITS.check_merge_free_space(total, short)) == "insufficient_storage"
