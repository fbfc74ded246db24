"""The `pattern` attributes of the console's form fields, each beside the server-side rule it mirrors.

A browser checks a field's `pattern` as the ECMAScript expression ``^(?:pattern)$`` compiled with the `v`
flag (HTML Standard, "compiling a pattern attribute regular expression"). Inside a character class `v` is
stricter than Python's `re` and than ECMAScript's `u`: ``( ) [ ] { } / - \\ |`` must be escaped (a `-` at
the end of a class too), and a doubled punctuator (``&&``, ``--``, ``..``, ``@@`` and the like) is reserved.
A pattern that does not compile is no error a user sees: the browser logs it and drops the field's check.
So a pattern here is written for `v`, and `tests/unit/console/test_input_patterns.py` proves that each
compiles under `v` in a real ECMAScript engine and accepts and refuses what its rule does.

Templates read them as ``input_patterns.<name>.html`` (a global of the page templates); a field's
``maxlength`` may repeat the rule's length limit, its pattern states it in full.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType

from yovision_platform.web import SUBJECT_PATTERN

__all__ = ["INPUT_PATTERNS", "InputPattern"]


@dataclass(frozen=True)
class InputPattern:
    html: str  # the attribute's value, valid under the `v` flag
    mirrors: re.Pattern[str]  # the rule the server applies to the same field, matched in full
    rule: str  # where that rule lives, for a reader and a failing test


INPUT_PATTERNS = MappingProxyType(
    {
        # the dev login's user id: a token subject (`POST /oidc/login` refuses any other, 422 invalid_subject)
        "subject": InputPattern(
            r"[A-Za-z0-9._:@\-]{1,128}", SUBJECT_PATTERN, "yovision_platform.web.SUBJECT_PATTERN"
        ),
    }
)
