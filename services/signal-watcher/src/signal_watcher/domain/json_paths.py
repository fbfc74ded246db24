"""JSON_FIELD paths: the two forms a user may write, and the one form that is stored.

- **Dotted** (the canonical form, stored and returned): segments separated by `.`, an array index written as
  a decimal segment, e.g. `data.items.0.price`. A segment is any text without `.` (and without NUL, the
  platform's text rule); it names an object key, or an index into an array.
- **`$`-rooted JSONPath**, only its plain subset: `$` followed by dot names and bracketed integer indexes,
  e.g. `$.data.items[0].price`, `$.items[2]`, `$[0].x`. It is accepted as the same path and normalised to
  the dotted form (`data.items.0.price`, `items.2`, `0.x`) when the definition is validated. A dot name has
  no space, control character or any of `. [ ] * ? @ ( ) ' " , : \\`; an index is `0` or a decimal number
  without a leading zero. Every other JSONPath feature (`..`, `*`, filters `[?(...)]`, slices `[1:2]`, unions
  `[0,1]`, negative indexes, quoted names `['a']`, functions) is refused: the dotted form cannot say what
  they mean, and a quoted name could hold a `.`, which the dotted form cannot store.

A path is JSONPath exactly when it is `$` or starts with `$.` or `$[`; any other path is dotted (so `$ref.x`
is the key `$ref`, then `x`). Consequently a first key named exactly `$` cannot be addressed (`$.$.a` is
refused). Both forms have at most JSON_PATH_MAX_SEGMENTS segments (after normalisation) and
JSON_PATH_MAX_CHARS characters as written. Refusals are ValidationFailed `invalid_json_path` with
JSON_PATH_HINT as their detail: a fixed text, never the input.

Pure: no I/O.
"""

from __future__ import annotations

import re

from signal_watcher.domain.errors import ValidationFailed

__all__ = [
    "JSON_PATH_HINT",
    "JSON_PATH_MAX_CHARS",
    "JSON_PATH_MAX_SEGMENTS",
    "JSON_PATH_PATTERN",
    "canonical_json_path",
    "validate_json_path",
]

JSON_PATH_MAX_SEGMENTS = 16
JSON_PATH_MAX_CHARS = 255
JSON_PATH_HINT = (
    "Write the path dotted (data.items.0.price) or as $-rooted JSONPath with dot names and bracketed "
    "integer indexes ($.data.items[0].price, $[0].x); at most 16 segments. Not supported: .., *, filters, "
    "slices, unions, negative indexes, quoted names."
)

_DOT_NAME = r"""[^\x00-\x20\x7f.\[\]*?@()'",:\\]+"""
_INDEX = "0|[1-9][0-9]*"
_STEP = re.compile(rf"\.({_DOT_NAME})|\[({_INDEX})\]")
_LAST_STEPS = JSON_PATH_MAX_SEGMENTS - 1
# The rules above as one JSON Schema pattern (ECMA-262 and Python alike; + the maximum length), published
# in the OpenAPI document; tests/unit/signal_watcher/test_published_rules.py proves it equal to the check.
_NOT_ROOT = r"(?!\$(?:[.\[]|$))"  # what follows is not `$` alone, `$.` or `$[` (which are JSONPath)
_ANY_STEP = rf"\.{_DOT_NAME}|\[(?:{_INDEX})\]"
_JSONPATH_FORM = rf"\$(?:\.{_NOT_ROOT}{_DOT_NAME}|\[(?:{_INDEX})\])(?:{_ANY_STEP}){{0,{_LAST_STEPS}}}"
_DOTTED_FORM = rf"{_NOT_ROOT}[^.\x00]+(?:\.[^.\x00]+){{0,{_LAST_STEPS}}}"
JSON_PATH_PATTERN = rf"^(?:{_DOTTED_FORM}|{_JSONPATH_FORM})$"


def _refused() -> ValidationFailed:
    return ValidationFailed("invalid_json_path", JSON_PATH_HINT)


def _is_jsonpath(path: str) -> bool:
    return path == "$" or path.startswith(("$.", "$["))


def _jsonpath_segments(path: str) -> list[str]:
    segments: list[str] = []
    position = 1  # after the `$`
    while position < len(path):
        step = _STEP.match(path, position)
        if step is None:
            raise _refused()
        name, index = step.groups()
        segments.append(name if name is not None else index)
        position = step.end()
    if not segments or segments[0] == "$":
        raise _refused()  # `$` alone selects the whole document; a first key `$` would read as the root
    return segments


def validate_json_path(path: str) -> tuple[str, ...]:
    """The segments of a path in either form (`$.data.items[0].price` and `data.items.0.price` alike give
    `("data", "items", "0", "price")`); ValidationFailed `invalid_json_path` (with JSON_PATH_HINT)."""
    if not path or len(path) > JSON_PATH_MAX_CHARS or "\x00" in path:
        raise _refused()
    segments = _jsonpath_segments(path) if _is_jsonpath(path) else path.split(".")
    if len(segments) > JSON_PATH_MAX_SEGMENTS or any(s == "" for s in segments):
        raise _refused()
    return tuple(segments)


def canonical_json_path(path: str) -> str:
    """The dotted form of an accepted path (stored and returned): `$.items[2]` -> `items.2`."""
    return ".".join(validate_json_path(path))
