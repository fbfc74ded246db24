"""The Jinja2 environment of the console's pages.

Autoescaped (HTML and SVG). A name the template reads that the view did not pass is an error
(:class:`NamesMustExist`), not an empty value: with Jinja's default, a view that passed ``status=`` to a
template reading ``reconcile`` rendered "No reconcile state" for every device, and the page looked as if an
API read had failed. A missing *key* of a passed API answer stays falsy, because the services' answers
leave optional fields out and templates test them (``{% if r.last_error_code %}``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, Undefined, select_autoescape
from jinja2.utils import missing

from console.domain.input_patterns import INPUT_PATTERNS
from console.domain.trace_fields import trace_id_of
from console.domain.waterfall import duration_text

TEMPLATES_DIR = Path(__file__).resolve().parents[1] / "templates"


class NamesMustExist(Undefined):
    """Undefined that fails on any use when it stands for a template variable nobody passed, and behaves
    like Jinja's default for a missing attribute or key of a value that was passed."""

    __slots__ = ()

    def _is_missing_name(self) -> bool:
        return self._undefined_obj is missing

    def _fail_if_missing_name(self) -> None:
        if self._is_missing_name():
            self._fail_with_undefined_error()

    def __str__(self) -> str:
        self._fail_if_missing_name()
        return ""

    def __bool__(self) -> bool:
        self._fail_if_missing_name()
        return False

    def __iter__(self) -> Any:
        self._fail_if_missing_name()
        return iter(())

    def __len__(self) -> int:
        self._fail_if_missing_name()
        return 0

    def __eq__(self, other: object) -> bool:
        self._fail_if_missing_name()
        return type(self) is type(other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return id(type(self))


def _when(value: object) -> str:
    return (str(value)[:19].replace("T", " ") + " UTC") if value else "-"


def _when_us(microseconds: int) -> str:
    moment = datetime.fromtimestamp(microseconds / 1_000_000, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def _is_trace_id(value: object) -> bool:
    return isinstance(value, str) and trace_id_of(value) == value


def page_templates() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=select_autoescape(["html", "svg"]),
        undefined=NamesMustExist,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pretty_json"] = lambda value: json.dumps(value, indent=2, sort_keys=True)
    env.filters["when"] = _when
    env.filters["when_us"] = _when_us
    env.filters["duration_us"] = duration_text
    env.tests["trace_id"] = _is_trace_id
    env.globals["input_patterns"] = INPUT_PATTERNS
    return env
