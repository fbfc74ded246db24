"""Keyset pages of the read APIs, newest first by ``(occurred_at, id)``, and their cursor text.

The cursor is the platform's codec (`yovision_platform.web`, ``<epoch µs>.<id>``), at most
`MAX_CURSOR_CHARS` characters here; anything else is the platform's `paging.InvalidCursor`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from yovision_platform import web
from yovision_platform.web import KeysetPage

MAX_CURSOR_CHARS = 64

T = TypeVar("T")


@dataclass(frozen=True)
class PagePosition:
    """Keyset position: rows strictly older than (occurred_at, id) come next."""

    occurred_at: datetime
    id: int


def page_of(
    rows: Sequence[T], limit: int, position: Callable[[T], PagePosition]
) -> KeysetPage[T, PagePosition]:
    """One page of rows, newest first, and where the next (older) one starts."""
    return KeysetPage.of(rows, limit, position)


def next_cursor(page: KeysetPage[Any, PagePosition]) -> str | None:
    return None if page.next_position is None else encode_cursor(page.next_position)


def encode_cursor(position: PagePosition) -> str:
    return web.encode_cursor(position.occurred_at, position.id)


def decode_cursor(cursor: str) -> PagePosition:
    if len(cursor) > MAX_CURSOR_CHARS:
        raise web.InvalidCursor
    return PagePosition(*web.decode_cursor(cursor, int))
