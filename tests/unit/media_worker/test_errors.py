"""media-worker's refusal classes: each code's HTTP status and Retry-After, as the API answered them before
the classes replaced the code -> status table."""

from __future__ import annotations

import pytest

from media_worker.domain import errors
from media_worker.domain.errors import REFUSAL_CODES, REFUSALS, MediaRefusal
from yovision_platform.errors import ServiceError
from yovision_platform.web import InvalidCursor

# The wire contract: code -> (status, Retry-After seconds or None).
ANSWERS: dict[str, tuple[int, int | None]] = {
    "length_required": (411, None),
    "request_too_large": (413, None),
    "chunked_upload_required": (413, None),
    "chunk_too_large": (413, None),
    "source_too_large": (422, None),
    "chunk_bytes_too_large": (422, None),
    "chunk_bytes_too_small": (422, None),
    "too_many_chunks": (422, None),
    "chunk_size_mismatch": (400, None),
    "chunk_checksum_mismatch": (400, None),
    "chunk_index_out_of_range": (400, None),
    "invalid_layout": (400, None),
    "invalid_multipart": (400, None),
    "layout_conflict": (409, None),
    "upload_incomplete": (409, None),
    "upload_not_open": (409, None),
    "merge_in_progress": (409, 5),
    "not_retryable": (409, None),
    "draining": (503, 30),
    "chunk_slots_busy": (429, 2),
    "free_space_unknown": (507, None),
    "insufficient_storage": (507, None),
    "not_found": (404, None),
    "invalid_cursor": (400, None),
}


def refusal_of(code: str) -> ServiceError:
    if code == "invalid_cursor":  # the listing's cursor: the platform's paging refusal
        return InvalidCursor()
    (refusal,) = [cls for cls in REFUSALS if code in cls.codes]
    return refusal() if len(refusal.codes) == 1 else refusal(code)


def test_every_code_belongs_to_exactly_one_class() -> None:
    assert sorted(REFUSAL_CODES) == sorted(ANSWERS)
    assert sum(len(cls.codes) for cls in REFUSALS) == len(REFUSAL_CODES) - 1  # and the platform's cursor


@pytest.mark.parametrize("code", sorted(ANSWERS))
def test_each_code_is_answered_with_its_status_and_retry_after(code: str) -> None:
    refusal = refusal_of(code)
    assert isinstance(refusal, ServiceError)
    assert (refusal.code, refusal.status, refusal.retry_after) == (code, *ANSWERS[code])
    expected = {} if ANSWERS[code][1] is None else {"Retry-After": str(ANSWERS[code][1])}
    assert refusal.response_headers() == expected


def test_single_code_classes_need_no_argument() -> None:
    single = [
        errors.LengthRequired,
        errors.MaterialNotFound,
        errors.MergeInProgress,
        errors.NotRetryable,
    ]
    assert [cls().code for cls in [*single, errors.ChunkSlotsBusy, errors.Draining]] == [
        "length_required",
        "not_found",
        "merge_in_progress",
        "not_retryable",
        "chunk_slots_busy",
        "draining",
    ]


@pytest.mark.parametrize(
    "family",
    [
        errors.UploadTooLarge,
        errors.LayoutRefused,
        errors.InvalidUpload,
        errors.UploadConflict,
        errors.InsufficientStorage,
    ],
)
def test_a_family_needs_one_of_its_own_codes(family: type[MediaRefusal]) -> None:
    with pytest.raises(TypeError):
        family()
    with pytest.raises(ValueError, match="has no code"):
        family("free text is not a code")
    with pytest.raises(ValueError, match="has no code"):
        family("not_found")
