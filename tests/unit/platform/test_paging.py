"""Keyset cursors round-trip exactly (to the microsecond, both key types) and refuse everything else."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from yovision_platform.paging import (
    MAX_CURSOR_CHARS,
    MAX_INT_KEY,
    InvalidCursor,
    decode_cursor,
    encode_cursor,
)

MOMENT = datetime(2026, 11, 30, 1, 2, 3, 456789, tzinfo=UTC)


def _raw(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "moment",
    [
        MOMENT,
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        MOMENT.astimezone(timezone(timedelta(hours=-7))),
    ],
)
def test_round_trip_is_exact(moment: datetime) -> None:
    key = uuid.uuid4()
    assert decode_cursor(encode_cursor(moment, key), uuid.UUID) == (moment, key)
    assert decode_cursor(encode_cursor(moment, MAX_INT_KEY), int) == (moment, MAX_INT_KEY)


def test_every_microsecond_of_a_second_round_trips() -> None:
    for micros in range(0, 1_000_000, 997):
        moment = MOMENT.replace(microsecond=micros)
        assert decode_cursor(encode_cursor(moment, 1), int)[0] == moment


def test_the_longest_cursor_fits_the_limit() -> None:
    longest = encode_cursor(datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), uuid.uuid4())
    assert len(longest) <= MAX_CURSOR_CHARS


def test_a_naive_timestamp_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        encode_cursor(datetime(2026, 1, 1), 1)


@pytest.mark.parametrize(
    ("cursor", "key_type"),
    [
        ("", int),
        ("!!!", int),
        ("bm90LWEtY3Vyc29y", int),
        ("x" * (MAX_CURSOR_CHARS + 1), int),
        ("OTk5OTk5OTk5OTk5OTk5OTk5LjE", int),  # 19-digit micros
        (_raw(f"1.{MAX_INT_KEY + 1}"), int),
        (_raw("1.-5"), int),
        (_raw("1.abc"), int),
        (_raw(f"1.{uuid.uuid4()}"), int),
        (_raw("1.42"), uuid.UUID),
        (_raw(f"1.{uuid.uuid4().hex}"), uuid.UUID),  # not the canonical spelling
        (_raw(f"1.{uuid.uuid4()}.2"), uuid.UUID),
        (_raw(f"999999999999999999.{uuid.uuid4()}"), uuid.UUID),  # past year 9999
        (base64.urlsafe_b64encode("1.\u00e9".encode()).decode(), int),
    ],
)
def test_garbage_is_refused(cursor: str, key_type: type[int] | type[uuid.UUID]) -> None:
    with pytest.raises(InvalidCursor):
        decode_cursor(cursor, key_type)
