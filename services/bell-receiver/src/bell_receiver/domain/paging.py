"""Keyset pages of the read APIs, newest first by ``(occurred_at, id)``, and their cursor text.

The cursor is the platform's codec (`yovision_platform.web`, ``<epoch µs>.<id>``), at most
`MAX_CURSOR_CHARS` characters here; anything else is the platform's `paging.InvalidCursor`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from yovision_platform import web

MAX_CURSOR_CHARS = 64

T = TypeVar("T")


@dataclass(frozen=True)
class PagePosition:
    """Keyset position: rows strictly older than (occurred_at, id) come next."""

    occurred_at: datetime
    id: int


@dataclass(frozen=True)
class KeysetPage(Generic[T]):
    """One page of rows, newest first, and where the next (older) one starts."""

    items: list[T]
    next_position: PagePosition | None

    @property
    def next_cursor(self) -> str | None:
        return None if self.next_position is None else encode_cursor(self.next_position)


def page_of(rows: Sequence[T], limit: int, position: Callable[[T], PagePosition]) -> KeysetPage[T]:
    """The first `limit` of `rows` (read with ``limit + 1``): a next position only when there are more."""
    items = list(rows[:limit])
    more = len(rows) > limit
    return KeysetPage(items, position(items[-1]) if more else None)


def encode_cursor(position: PagePosition) -> str:
    return web.encode_cursor(position.occurred_at, position.id)


def decode_cursor(cursor: str) -> PagePosition:
    if len(cursor) > MAX_CURSOR_CHARS:
        raise web.InvalidCursor
    return PagePosition(*web.decode_cursor(cursor, int))
