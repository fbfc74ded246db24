"""Streaming multipart parsing: yields the bytes of the `file` part as they arrive, never buffering it.

Starlette's form parser spools parts to the system temp folder before the handler sees them; this parser
hands each piece straight to the caller, which writes it to the storage and enforces the size limit.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from python_multipart.multipart import MultipartParser, parse_options_header

from media_worker.domain.errors import InvalidUpload

__all__ = ["FILE_FIELD", "file_part_stream"]

FILE_FIELD = b"file"


@dataclass
class _State:
    header_field: bytes = b""
    header_value: bytes = b""
    in_file: bool = False
    files_seen: int = 0
    ready: list[bytes] = field(default_factory=list)


def _boundary(content_type: str | None) -> bytes:
    if content_type is None:
        raise InvalidUpload("invalid_multipart")
    kind, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise InvalidUpload("invalid_multipart")
    return boundary


def _parse(step: Callable[[], object]) -> None:
    """One parser step; anything it raises means the body is not the multipart we accept."""
    try:
        step()
    except InvalidUpload:
        raise
    except Exception:
        raise InvalidUpload("invalid_multipart") from None


async def file_part_stream(content_type: str | None, body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The content of the one part named `file`; InvalidUpload(invalid_multipart) for anything else. Errors of
    `body` itself (a client disconnect, a read deadline) pass through unchanged."""
    state = _State()

    def on_header_field(data: bytes, start: int, end: int) -> None:
        state.header_field += data[start:end]

    def on_header_value(data: bytes, start: int, end: int) -> None:
        state.header_value += data[start:end]

    def on_header_end() -> None:
        if state.header_field.lower() == b"content-disposition":
            _, options = parse_options_header(state.header_value)
            if options.get(b"name") == FILE_FIELD:
                state.in_file = True
                state.files_seen += 1
        state.header_field = b""
        state.header_value = b""

    def on_part_data(data: bytes, start: int, end: int) -> None:
        if state.in_file:
            state.ready.append(bytes(data[start:end]))

    def on_part_end() -> None:
        state.in_file = False

    parser = MultipartParser(
        _boundary(content_type),
        {
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_part_data": on_part_data,
            "on_part_end": on_part_end,
        },
    )
    async for piece in body:
        _parse(functools.partial(parser.write, piece))
        while state.ready:
            yield state.ready.pop(0)
    _parse(parser.finalize)
    if state.files_seen != 1:
        raise InvalidUpload("invalid_multipart")
