"""The notification page cursor round-trips exactly and refuses anything else."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bell_receiver.domain.paging import PagePosition, decode_cursor, encode_cursor
from yovision_platform.web import _paging as paging


def test_round_trip_keeps_microseconds() -> None:
    position = PagePosition(datetime(2026, 11, 30, 1, 2, 3, 456789, tzinfo=UTC), 42)
    assert decode_cursor(encode_cursor(position)) == position


@pytest.mark.parametrize("cursor", ["", "!!!", "bm90LWEtY3Vyc29y", "x" * 65, "OTk5OTk5OTk5OTk5OTk5OTk5LjE"])
def test_garbage_is_refused(cursor: str) -> None:
    with pytest.raises(paging.InvalidCursor):
        decode_cursor(cursor)
