"""Keyset cursors round-trip exactly (to the microsecond, both key types), refuse everything else, and the
published pattern accepts exactly what the decoder accepts."""

from __future__ import annotations

import random
import re
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from yovision_platform.patterns import at_most
from yovision_platform.web._paging import (
    MAX_CURSOR_CHARS,
    MAX_INT_KEY,
    InvalidCursor,
    cursor_pattern,
    decode_cursor,
    encode_cursor,
)

MOMENT = datetime(2026, 11, 30, 1, 2, 3, 456789, tzinfo=UTC)

SOME_UUID = uuid.UUID("5c3a0c6e-2f41-4c8e-9a55-0d8b7e6f1a23")  # fixed: test ids must not vary between runs


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
        ("MTc2NDQ2NDUyMzQ1Njc4OS40Mg", int),  # base64 of "1764464523456789.42": the format before 1.x
        ("1" * (MAX_CURSOR_CHARS - 2) + ".1", int),
        ("9999999999999999999.1", int),  # 19-digit micros
        (f"1.{MAX_INT_KEY + 1}", int),
        ("1.-5", int),
        ("1.abc", int),
        ("01.5", int),  # one spelling per position
        ("1.05", int),
        (f"1.{SOME_UUID}", int),
        ("1.42", uuid.UUID),
        (f"1.{SOME_UUID.hex}", uuid.UUID),  # not the canonical spelling
        (f"1.{str(SOME_UUID).upper()}", uuid.UUID),
        (f"1.{SOME_UUID}.2", uuid.UUID),
        (f"999999999999999999.{SOME_UUID}", uuid.UUID),  # past year 9999
        (f"-62135596800000001.{SOME_UUID}", uuid.UUID),  # before year 1
        ("1.\u00e9", int),
        ("1.5\n", int),
    ],
)
def test_garbage_is_refused(cursor: str, key_type: type[int] | type[uuid.UUID]) -> None:
    with pytest.raises(InvalidCursor):
        decode_cursor(cursor, key_type)


@pytest.mark.parametrize("limit", [0, 1, 9, 10, 99, 100, 250, 1000, 7305, MAX_INT_KEY])
def test_at_most_matches_exactly_the_numbers_up_to_the_limit(limit: int) -> None:
    pattern = re.compile(at_most(limit))
    rng = random.Random(limit)
    numbers = {
        *range(0, 1200),
        limit - 1,
        limit,
        limit + 1,
        limit * 10 + 9,
        *(rng.randrange(limit * 3 + 2) for _ in range(2000)),
    }
    for number in (n for n in numbers if n >= 0):
        assert (pattern.fullmatch(str(number)) is not None) == (number <= limit), number


@pytest.mark.parametrize("key_type", [int, uuid.UUID])
def test_the_published_pattern_is_what_the_decoder_accepts(key_type: type[int] | type[uuid.UUID]) -> None:
    """JSON Schema patterns are searched, not matched: anchored, the published one is a full match."""
    pattern = re.compile(cursor_pattern(key_type))
    key = MAX_INT_KEY if key_type is int else uuid.UUID(int=7)
    edges = [datetime.min.replace(tzinfo=UTC), MOMENT, datetime.max.replace(tzinfo=UTC)]
    for moment in edges:
        cursor = encode_cursor(moment, key)
        assert pattern.search(cursor) and decode_cursor(cursor, key_type) == (moment, key)
    for garbage in ("", "1", "1.", ".1", "1.1.1", "+1.1", "1e3.1", f"{10**18}.1"):
        assert pattern.search(garbage) is None
        with pytest.raises(InvalidCursor):
            decode_cursor(garbage, key_type)
