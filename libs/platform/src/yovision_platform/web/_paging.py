"""Keyset paging cursors: a URL-safe text naming the last row a page showed.

A position is a timestamp (the sort column, kept to the microsecond PostgreSQL stores) and a tie-breaking
key (a bigint id or a UUID). The text is ``<epoch microseconds>.<key>`` (e.g.
``1764464523456789.42``); integer arithmetic only, so a position always round-trips exactly and the next
page neither repeats nor skips a row that shares the timestamp.

The published contract states the format exactly: :func:`cursor_pattern` is the regular expression the
APIs put in their OpenAPI documents, and :func:`decode_cursor` accepts exactly the texts it matches (the
number ranges are part of the pattern: microseconds within years 1..9999, an int key within bigint).
Anything else -- another shape, a key of the wrong type, an out-of-range number, too long -- is
:class:`InvalidCursor`, which the APIs answer as ``400 invalid_cursor``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar, overload

from fastapi import Query

from yovision_platform.errors import ServiceError
from yovision_platform.patterns import at_most

__all__ = [
    "MAX_CURSOR_CHARS",
    "InvalidCursor",
    "KeysetPage",
    "cursor_pattern",
    "cursor_query",
    "decode_cursor",
    "encode_cursor",
]

MAX_CURSOR_CHARS = 96
MAX_INT_KEY = 2**63 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_MIN_MICROS = (datetime.min.replace(tzinfo=UTC) - _EPOCH) // _MICROSECOND
_MAX_MICROS = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // _MICROSECOND
_UUID_TEXT = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


T = TypeVar("T")
P = TypeVar("P")


@dataclass(frozen=True)
class KeysetPage(Generic[T, P]):
    """One page of a keyset-paged list: its items, and the position the next page starts after (None on
    the last page)."""

    items: list[T]
    next_position: P | None

    @classmethod
    def of(cls, rows: Sequence[T], limit: int, position: Callable[[T], P]) -> KeysetPage[T, P]:
        """The first `limit` of `rows` (read with ``limit + 1``): a next position only when there are more."""
        items = list(rows[:limit])
        return cls(items, position(items[-1]) if len(rows) > limit else None)


class InvalidCursor(ServiceError, ValueError):
    """The cursor was not made by :func:`encode_cursor` for this kind of key (400 `invalid_cursor`
    wherever it is raised; still a ValueError for validators)."""

    code = "invalid_cursor"
    status = 400


_MICROS_TEXT = f"(?:{at_most(_MAX_MICROS)}|-{at_most(-_MIN_MICROS)})"
_PATTERNS = {
    int: f"^{_MICROS_TEXT}\\.{at_most(MAX_INT_KEY)}$",
    uuid.UUID: f"^{_MICROS_TEXT}\\.{_UUID_TEXT}$",
}
_COMPILED = {key_type: re.compile(text[1:-1]) for key_type, text in _PATTERNS.items()}


def cursor_pattern(key_type: type[int] | type[uuid.UUID]) -> str:
    """The anchored pattern of every cursor :func:`decode_cursor` accepts for this key type."""
    return _PATTERNS[key_type]


def cursor_query(
    key_type: type[int] | type[uuid.UUID],
    *,
    max_length: int = MAX_CURSOR_CHARS,
    description: str | None = None,
) -> Any:
    """The `cursor` query parameter: its published pattern is `cursor_pattern`, enforced by
    `decode_cursor` (400 `invalid_cursor`) rather than by the framework (a 422 would hide the code)."""
    return Query(
        max_length=max_length,
        description=description or "`next_cursor` of the previous page.",
        json_schema_extra={"pattern": cursor_pattern(key_type)},
    )


def encode_cursor(at: datetime, key: int | uuid.UUID) -> str:
    if at.tzinfo is None:
        raise ValueError("a cursor's timestamp must be timezone-aware")
    return f"{(at - _EPOCH) // _MICROSECOND}.{key}"


@overload
def decode_cursor(cursor: str, key_type: type[int]) -> tuple[datetime, int]: ...
@overload
def decode_cursor(cursor: str, key_type: type[uuid.UUID]) -> tuple[datetime, uuid.UUID]: ...
def decode_cursor(cursor: str, key_type: type[int] | type[uuid.UUID]) -> tuple[datetime, int | uuid.UUID]:
    if len(cursor) > MAX_CURSOR_CHARS or _COMPILED[key_type].fullmatch(cursor) is None:
        raise InvalidCursor
    micros, raw_key = cursor.split(".")
    at = _EPOCH + int(micros) * _MICROSECOND
    return at, (int(raw_key) if key_type is int else uuid.UUID(raw_key))
