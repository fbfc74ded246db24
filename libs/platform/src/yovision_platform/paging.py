"""Keyset paging cursors: an opaque, URL-safe text naming the last row a page showed.

A position is a timestamp (the sort column, kept to the microsecond PostgreSQL stores) and a tie-breaking
key (a bigint id or a UUID). The text is base64url (no padding) of ``<epoch microseconds>.<key>``; integer
arithmetic only, so a position always round-trips exactly and the next page neither repeats nor skips a row
that shares the timestamp. Anything else -- not base64, another shape, a key of the wrong type, an
out-of-range number, too long -- is :class:`InvalidCursor`, which the APIs answer as ``400
invalid_cursor``.
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import overload

__all__ = ["MAX_CURSOR_CHARS", "InvalidCursor", "decode_cursor", "encode_cursor"]

MAX_CURSOR_CHARS = 96
MAX_INT_KEY = 2**63 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_TEXT = re.compile(r"(-?[0-9]{1,18})\.([0-9a-f-]{1,36})")
_INT_KEY = re.compile(r"[0-9]{1,19}")


class InvalidCursor(ValueError):
    """The cursor was not made by :func:`encode_cursor` for this kind of key."""


def encode_cursor(at: datetime, key: int | uuid.UUID) -> str:
    if at.tzinfo is None:
        raise ValueError("a cursor's timestamp must be timezone-aware")
    micros = (at - _EPOCH) // _MICROSECOND
    return base64.urlsafe_b64encode(f"{micros}.{key}".encode("ascii")).decode("ascii").rstrip("=")


@overload
def decode_cursor(cursor: str, key_type: type[int]) -> tuple[datetime, int]: ...
@overload
def decode_cursor(cursor: str, key_type: type[uuid.UUID]) -> tuple[datetime, uuid.UUID]: ...
def decode_cursor(cursor: str, key_type: type[int] | type[uuid.UUID]) -> tuple[datetime, int | uuid.UUID]:
    if not cursor or len(cursor) > MAX_CURSOR_CHARS:
        raise InvalidCursor
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        raise InvalidCursor from None
    match = _TEXT.fullmatch(text)
    if match is None:
        raise InvalidCursor
    micros, raw_key = match.groups()
    try:
        at = _EPOCH + int(micros) * _MICROSECOND
    except OverflowError:
        raise InvalidCursor from None
    return at, _key(raw_key, key_type)


def _key(raw: str, key_type: type[int] | type[uuid.UUID]) -> int | uuid.UUID:
    if key_type is int:
        if _INT_KEY.fullmatch(raw) is None or int(raw) > MAX_INT_KEY:
            raise InvalidCursor
        return int(raw)
    try:
        key = uuid.UUID(raw)
    except ValueError:
        raise InvalidCursor from None
    if str(key) != raw:  # one spelling per key: the canonical one encode_cursor writes
        raise InvalidCursor
    return key
