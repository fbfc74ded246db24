"""Watcher definitions: limits, validation, baseline-reset rules, failure backoff and status transitions.

Pure: no I/O. Every SPEC section 5 limit is a named constant here (or in `judging` / `ssrf`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace

from signal_watcher.domain.errors import ValidationFailed
from signal_watcher.domain.json_paths import canonical_json_path
from signal_watcher.domain.ssrf import STRICT_GUARD, AddressGuard, check_url

__all__ = [
    "AUTO_DISABLE_FAILURES",
    "BACKOFF_MAX_MULTIPLIER",
    "INTERVAL_MAX_MINUTES",
    "INTERVAL_MIN_MINUTES",
    "MAX_HEADERS",
    "CompareMode",
    "FailureOutcome",
    "Header",
    "Method",
    "Status",
    "WatcherSpec",
    "after_failure",
    "backoff_minutes",
    "clamp_interval",
    "resets_baseline",
    "validate_headers",
]

INTERVAL_MIN_MINUTES = 1
INTERVAL_MAX_MINUTES = 1440
MAX_HEADERS = 20
NAME_MAX_CHARS = 128
AGENT_ID_MAX_CHARS = 128
PROMPT_TEMPLATE_MAX_CHARS = 2000
HEADER_KEY_MAX_CHARS = 256
HEADER_VALUE_MAX_CHARS = 8192
BODY_MAX_BYTES = 64 * 1024
AUTO_DISABLE_FAILURES = 5
BACKOFF_MAX_MULTIPLIER = 32
BACKOFF_MAX_EXPONENT = 5  # 2**5 == BACKOFF_MAX_MULTIPLIER; larger shifts only waste work
FORBIDDEN_HEADER_KEYS = frozenset({"host", "content-length", "transfer-encoding"})
_NEWLINES = ("\r", "\n")

# The rules below as JSON Schema patterns (ECMA-262 and Python alike), published in the OpenAPI document;
# tests/unit/signal_watcher/test_published_rules.py proves each equal to its check.
NON_BLANK_PATTERN = r"^[^\x00]*[^\s\x00][^\x00]*$"  # str.strip() leaves something
_KEY_EDGE = "[!-9;-~]"  # printable ASCII without space and ':'
_KEY_FORBIDDEN = "|".join(
    "".join(f"[{c.upper()}{c}]" if c.isalpha() else c for c in key) for key in sorted(FORBIDDEN_HEADER_KEYS)
)
HEADER_KEY_PATTERN = f"^(?!(?:{_KEY_FORBIDDEN})$){_KEY_EDGE}(?:[ -9;-~]*{_KEY_EDGE})?$"  # + max length
HEADER_VALUE_PATTERN = r"^[^\r\n\x00]*$"


class Method(enum.StrEnum):
    GET = "GET"
    POST = "POST"


class CompareMode(enum.StrEnum):
    HASH = "HASH"
    JSON_FIELD = "JSON_FIELD"
    STATUS_CODE = "STATUS_CODE"


class Status(enum.StrEnum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    DISABLED = "DISABLED"


@dataclass(frozen=True)
class Header:
    key: str
    value: str


def clamp_interval(minutes: int) -> int:
    """Interval minutes clamped to INTERVAL_MIN_MINUTES..INTERVAL_MAX_MINUTES (SPEC: clamp, not reject)."""
    return max(INTERVAL_MIN_MINUTES, min(INTERVAL_MAX_MINUTES, minutes))


def validate_headers(headers: Sequence[Header]) -> tuple[Header, ...]:
    if len(headers) > MAX_HEADERS:
        raise ValidationFailed("too_many_headers")
    for header in headers:
        key, value = header.key, header.value
        if not key or ":" in key or any(c in key for c in _NEWLINES) or key != key.strip():
            raise ValidationFailed("invalid_header_key")
        if len(key) > HEADER_KEY_MAX_CHARS or not key.isascii() or not key.isprintable():
            raise ValidationFailed("invalid_header_key")
        if key.lower() in FORBIDDEN_HEADER_KEYS:
            raise ValidationFailed("forbidden_header")
        if any(c in value for c in _NEWLINES) or "\x00" in value or len(value) > HEADER_VALUE_MAX_CHARS:
            raise ValidationFailed("invalid_header_value")
    return tuple(headers)


@dataclass(frozen=True)
class WatcherSpec:
    """The user-editable definition of a watcher, validated by `validated()`."""

    name: str
    agent_id: str
    url: str
    method: Method
    headers: tuple[Header, ...]
    body: str | None
    interval_minutes: int
    compare_mode: CompareMode
    json_path: str | None
    prompt_template: str

    def validated(self, guard: AddressGuard = STRICT_GUARD) -> WatcherSpec:
        """The spec with its interval clamped and its json path in the dotted form (`domain.json_paths`);
        ValidationFailed (or UrlRefused, checked with `guard`)."""
        if not self.name.strip() or len(self.name) > NAME_MAX_CHARS:
            raise ValidationFailed("invalid_name")
        if not self.agent_id.strip() or len(self.agent_id) > AGENT_ID_MAX_CHARS:
            raise ValidationFailed("invalid_agent_id")
        check_url(self.url, guard)
        validate_headers(self.headers)
        if self.body is not None:
            if self.method is not Method.POST:
                raise ValidationFailed("body_requires_post")
            if len(self.body.encode()) > BODY_MAX_BYTES:
                raise ValidationFailed("body_too_large")
        json_path = self.json_path
        if self.compare_mode is CompareMode.JSON_FIELD:
            json_path = canonical_json_path(self.json_path or "")
        elif self.json_path is not None:
            raise ValidationFailed("json_path_requires_json_field")
        if not self.prompt_template.strip() or len(self.prompt_template) > PROMPT_TEMPLATE_MAX_CHARS:
            raise ValidationFailed("invalid_prompt_template")
        return replace(self, interval_minutes=clamp_interval(self.interval_minutes), json_path=json_path)


def resets_baseline(old: WatcherSpec, new: WatcherSpec) -> bool:
    """Editing URL, method, headers, body, mode or path resets the baseline; name/prompt/interval do not."""
    return (old.url, old.method, old.headers, old.body, old.compare_mode, old.json_path) != (
        new.url,
        new.method,
        new.headers,
        new.body,
        new.compare_mode,
        new.json_path,
    )


def backoff_minutes(interval_minutes: int, failures: int) -> int:
    """Minutes until the next check after `failures` consecutive failures: interval * min(2^failures, 32)."""
    return interval_minutes * min(1 << min(max(failures, 0), BACKOFF_MAX_EXPONENT), BACKOFF_MAX_MULTIPLIER)


@dataclass(frozen=True)
class FailureOutcome:
    failures: int
    status: Status
    next_check_in_minutes: int
    disabled_now: bool


def after_failure(status: Status, failures_before: int, interval_minutes: int) -> FailureOutcome:
    """State after one more failure. Only ACTIVE becomes DISABLED, exactly when the count reaches 5."""
    failures = failures_before + 1
    disable = status is Status.ACTIVE and failures >= AUTO_DISABLE_FAILURES
    return FailureOutcome(
        failures=failures,
        status=Status.DISABLED if disable else status,
        next_check_in_minutes=backoff_minutes(interval_minutes, failures),
        disabled_now=disable,
    )
