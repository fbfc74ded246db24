"""Regular expressions the APIs both enforce and publish (as JSON Schema `pattern`s in their OpenAPI).

A JSON Schema pattern is ECMA-262 and *searched*, not matched; the servers match in full with Python's
`re`. So a published pattern is anchored (`^...$`) and written in the syntax both engines read alike
(character classes, `(?:...)`, `(?=...)`, `(?!...)`, `{m,n}`; no `\\Z`, no named groups, no flags), and the
check that enforces it is the same expression matched with `re.fullmatch`.
"""

from __future__ import annotations

import re

__all__ = ["anchored", "at_most", "json_schema_match"]


def at_most(limit: int) -> str:
    """A regular expression matching exactly the decimal numbers 0..`limit` (no leading zeros)."""
    digits = str(limit)
    shorter = f"[1-9][0-9]{{0,{len(digits) - 2}}}" if len(digits) > 1 else None
    same_length = []
    for i, digit in enumerate(digits):
        rest = len(digits) - i - 1
        low = "1" if i == 0 else "0"
        if digit > low:
            upper = chr(ord(digit) - 1)
            first = low if low == upper else f"[{low}-{upper}]"
            same_length.append(f"{digits[:i]}{first}[0-9]{{{rest}}}")
    same_length.append(digits)
    branches = ["0", *([shorter] if shorter else []), *same_length]
    return "(?:" + "|".join(dict.fromkeys(branches)) + ")"


def anchored(expression: str) -> str:
    """The published form of `expression`: anchored at both ends."""
    return f"^(?:{expression})$"


_DOLLAR = re.compile(r"(?<!\\)\$(?=\)|$)")  # an anchor: before a group's end or at the end


def json_schema_match(published: str, text: str) -> bool:
    """Whether `text` is valid against the published pattern as JSON Schema reads it: searched, with `$`
    at the end of the text only (Python's `$` also matches before a final newline)."""
    return re.search(_DOLLAR.sub(r"\\Z", published), text) is not None
