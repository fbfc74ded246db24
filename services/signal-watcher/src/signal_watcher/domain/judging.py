"""Judging a probe response, rendering the trigger prompt, and the trigger-rate warning.

HASH = SHA-256 of the body bytes; JSON_FIELD = the value at a path (`domain.json_paths`: dotted, array
indexes allowed; a stored path written before 0.3.0 as `$`-rooted JSONPath is read as JSONPath too), where a
parse error, a missing segment or a null value is a failure (never an empty value); STATUS_CODE = the code.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from signal_watcher.domain.errors import ValidationFailed
from signal_watcher.domain.json_paths import validate_json_path
from signal_watcher.domain.model import CompareMode
from yovision_platform.errors import PlatformError

__all__ = [
    "DIFF_SIDE_MAX_CHARS",
    "PROMPT_MAX_CHARS",
    "TRIGGER_RATE_LIMITED",
    "TRIGGER_RATE_LIMIT_PER_HOUR",
    "JudgeFailed",
    "Judged",
    "build_diff",
    "extract_json_path",
    "is_trigger_rate_limited",
    "judge",
    "render_prompt",
]

DIFF_SIDE_MAX_CHARS = 500
PROMPT_MAX_CHARS = 32_000
TRIGGER_RATE_LIMIT_PER_HOUR = 4
TRIGGER_RATE_LIMITED = "TRIGGER_RATE_LIMITED"
_PLACEHOLDER = re.compile(r"\{(url|name|diff)\}")


class JudgeFailed(PlatformError):
    """The response cannot be judged; `code`: json_parse_error, json_path_missing, json_value_null."""

    code = "judge_failed"


@dataclass(frozen=True)
class Judged:
    value_hash: str
    excerpt: str  # the judged value as text, at most DIFF_SIDE_MAX_CHARS (for {diff} and previews)


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def extract_json_path(root: object, path: str) -> object:
    """`data.items.0.price` -> root['data']['items'][0]['price']; JudgeFailed when absent or null. A stored
    path that is not valid any more (`$.a[*]`, accepted before 0.3.0 as the keys `$` and `a[*]`) selects
    nothing: `json_path_missing`."""
    try:
        segments = validate_json_path(path)
    except ValidationFailed:
        raise JudgeFailed("json_path_missing") from None
    node = root
    for segment in segments:
        if isinstance(node, dict) and segment in node:
            node = node[segment]
        elif isinstance(node, list) and segment.isascii() and segment.isdigit() and int(segment) < len(node):
            node = node[int(segment)]
        else:
            raise JudgeFailed("json_path_missing")
    if node is None:
        raise JudgeFailed("json_value_null")
    return node


def judge(mode: CompareMode, json_path: str | None, status_code: int, body: bytes) -> Judged:
    if mode is CompareMode.STATUS_CODE:
        text = str(status_code)
        return Judged(_sha256_hex(text.encode()), text)
    if mode is CompareMode.HASH:
        return Judged(
            _sha256_hex(body),
            body[: DIFF_SIDE_MAX_CHARS * 4].decode("utf-8", "replace")[:DIFF_SIDE_MAX_CHARS],
        )
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise JudgeFailed("json_parse_error") from None
    value = extract_json_path(document, json_path or "")
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return Judged(_sha256_hex(text.encode()), text[:DIFF_SIDE_MAX_CHARS])


def build_diff(mode: CompareMode, json_path: str | None, old: str, new: str) -> str:
    """Old and new values, each truncated to DIFF_SIDE_MAX_CHARS, with a per-mode label."""
    old, new = old[:DIFF_SIDE_MAX_CHARS], new[:DIFF_SIDE_MAX_CHARS]
    if mode is CompareMode.STATUS_CODE:
        return f"[HTTP status] {old} -> {new}"
    if mode is CompareMode.JSON_FIELD:
        return f"[field {json_path}] old: {old} -> new: {new}"
    return f"[response body, first {DIFF_SIDE_MAX_CHARS} chars]\nold:\n{old}\n---\nnew:\n{new}"


def render_prompt(template: str, *, url: str, name: str, diff: str) -> str:
    """One pass over the template: only `{url}`, `{name}`, `{diff}` are replaced; `$`, `\\` and other braces
    stay literal, and substituted values are never scanned again."""
    values = {"url": url, "name": name, "diff": diff}
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)[:PROMPT_MAX_CHARS]


def is_trigger_rate_limited(triggers_in_last_hour: int) -> bool:
    """True when this trigger is the fifth or later within one hour (a warning; it still triggers)."""
    return triggers_in_last_hour >= TRIGGER_RATE_LIMIT_PER_HOUR
