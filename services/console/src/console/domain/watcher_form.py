"""The watcher form: from posted fields to the signal-watcher API body, and the API's error codes back to
the field they belong to (so the page shows each error beside its field)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

FIELDS = (
    "name",
    "agent_id",
    "url",
    "method",
    "interval_minutes",
    "compare_mode",
    "json_path",
    "prompt_template",
)
HEADER_ROWS = 3
# signal-watcher's domain codes (ValidationFailed) by prefix -> the form field they concern
_CODE_FIELDS = (
    ("url", "url"),
    ("ssrf", "url"),
    ("header", "headers"),
    ("body", "body"),
    ("interval", "interval_minutes"),
    ("json_path", "json_path"),
    ("prompt", "prompt_template"),
    ("name", "name"),
    ("agent", "agent_id"),
    ("method", "method"),
    ("compare", "compare_mode"),
)


def body_of(form: Mapping[str, Any], header_pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    body: dict[str, Any] = {k: str(form.get(k, "")).strip() for k in FIELDS}
    interval = body["interval_minutes"]
    body["interval_minutes"] = int(interval) if interval.isdigit() else interval or 15
    body["json_path"] = body["json_path"] or None
    body["headers"] = [{"key": k, "value": v} for k, v in header_pairs if k]
    posted_body = str(form.get("body", ""))
    if posted_body:
        body["body"] = posted_body
    return body


def field_of(code: str, fields: Sequence[str]) -> dict[str, str]:
    """Which field an API error belongs to: validation `fields` first, else the code's prefix."""
    if fields:
        return {f.split(".")[0]: code for f in fields}
    for prefix, field in _CODE_FIELDS:
        if code.startswith(prefix):
            return {field: code}
    return {"form": code}
