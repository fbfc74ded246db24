"""Request and response bodies of the signal-watcher API. Responses never carry secrets: sensitive header
values are masked and the body is shown only by its length."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from signal_watcher.domain import model as rules
from signal_watcher.domain.json_paths import JSON_PATH_MAX_CHARS, JSON_PATH_MAX_SEGMENTS, JSON_PATH_PATTERN
from signal_watcher.domain.masking import body_length, mask_headers
from signal_watcher.domain.model import MAX_HEADERS, CompareMode, Method, Status
from signal_watcher.domain.records import CheckRow, WatcherRecord
from signal_watcher.domain.ssrf import PORT_MAX, PORT_MIN, URL_MAX_CHARS, URL_PATTERN
from signal_watcher.service_layer.watchers import Preview
from yovision_platform.web import JsonInt

__all__ = [
    "CheckOut",
    "CheckPage",
    "HeaderModel",
    "StatusIn",
    "TestResultOut",
    "WatcherAdminOut",
    "WatcherIn",
    "WatcherOut",
    "WatcherPage",
]


def _text(max_chars: int, pattern: str = rules.NON_BLANK_PATTERN) -> dict[str, JsonValue]:
    """A rule the domain checks with its own error code (422 `invalid_<field>`), stated in the schema."""
    return {"maxLength": max_chars, "pattern": pattern}


class HeaderModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(
        description="Printable ASCII, no `:`, no surrounding spaces; not Host, Content-Length or "
        "Transfer-Encoding (422 `invalid_header_key`, `forbidden_header`).",
        json_schema_extra=_text(rules.HEADER_KEY_MAX_CHARS, rules.HEADER_KEY_PATTERN),
    )
    value: str = Field(
        description="No CR or LF (422 `invalid_header_value`).",
        json_schema_extra=_text(rules.HEADER_VALUE_MAX_CHARS, rules.HEADER_VALUE_PATTERN),
    )


# Cross-field rules of `WatcherSpec.validated`: a body only with POST (else 422 `body_requires_post`), a
# json_path exactly with JSON_FIELD (422 `invalid_json_path`, `json_path_requires_json_field`).
_CROSS_FIELD_RULES: dict[str, JsonValue] = {
    "allOf": [
        {
            "if": {"properties": {"method": {"const": Method.POST.value}}, "required": ["method"]},
            "else": {"properties": {"body": {"type": "null"}}},
        },
        {
            "if": {
                "properties": {"compare_mode": {"const": CompareMode.JSON_FIELD.value}},
                "required": ["compare_mode"],
            },
            "then": {"properties": {"json_path": {"type": "string"}}, "required": ["json_path"]},
            "else": {"properties": {"json_path": {"type": "null"}}},
        },
    ]
}


class WatcherIn(BaseModel):
    """Create, or replace on update. On update, a sensitive header sent with the masked value `******`
    keeps its stored value, and an absent `body` keeps the stored body (`null` removes it)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_CROSS_FIELD_RULES)
    name: str = Field(json_schema_extra=_text(rules.NAME_MAX_CHARS))
    agent_id: str = Field(json_schema_extra=_text(rules.AGENT_ID_MAX_CHARS))
    url: str = Field(
        description=(
            f"http or https, at most {URL_MAX_CHARS} characters, no userinfo, port {PORT_MIN}..{PORT_MAX} "
            "(1 to 5 ASCII digits; else 422 `url_port_invalid`); the SSRF policy refuses non-public hosts "
            "and addresses with 403 `ssrf_*` (it depends on the deployment's allow-list and on DNS), and a "
            "deployment that confines probes to listed networks refuses any other address with 403 "
            "`probe_network_confined`."
        ),
        json_schema_extra=_text(URL_MAX_CHARS, URL_PATTERN),
    )
    method: Method = Method.GET
    headers: list[HeaderModel] = Field(default_factory=list, max_length=MAX_HEADERS)
    body: str | None = Field(
        default=None,
        description=f"POST only; at most {rules.BODY_MAX_BYTES} bytes in UTF-8 (422 `body_too_large`).",
        json_schema_extra={"x-max-bytes": rules.BODY_MAX_BYTES},
    )
    interval_minutes: JsonInt = Field(
        default=15,
        description=f"Clamped to {rules.INTERVAL_MIN_MINUTES}..{rules.INTERVAL_MAX_MINUTES} (SPEC: clamp, "
        "not reject): any integer is accepted and the stored value is within the bounds.",
        json_schema_extra={
            "x-clamped-to": {"minimum": rules.INTERVAL_MIN_MINUTES, "maximum": rules.INTERVAL_MAX_MINUTES}
        },
    )
    compare_mode: CompareMode = CompareMode.HASH
    json_path: str | None = Field(
        default=None,
        description=f"JSON_FIELD only, at most {JSON_PATH_MAX_SEGMENTS} segments: dotted "
        "(`data.items.0.price`, an array index as a decimal segment) or `$`-rooted JSONPath with dot names "
        "and bracketed integer indexes (`$.data.items[0].price`, `$[0].x`), which is stored and returned in "
        "the dotted form. Other JSONPath (`..`, `*`, filters, slices, unions, quoted names) is 422 "
        "`invalid_json_path`, whose `detail` shows the accepted forms.",
        json_schema_extra={
            "anyOf": [
                {"type": "string", **_text(JSON_PATH_MAX_CHARS, JSON_PATH_PATTERN)},
                {"type": "null"},
            ]
        },
    )
    prompt_template: str = Field(json_schema_extra=_text(rules.PROMPT_TEMPLATE_MAX_CHARS))


class StatusIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["ACTIVE", "PAUSED"]


class WatcherOut(BaseModel):
    id: uuid.UUID
    name: str
    agent_id: str
    url: str
    method: Method
    headers: list[HeaderModel]
    body_length: int | None
    interval_minutes: int = Field(ge=rules.INTERVAL_MIN_MINUTES, le=rules.INTERVAL_MAX_MINUTES)
    compare_mode: CompareMode
    json_path: str | None
    prompt_template: str
    status: Status
    has_baseline: bool
    last_checked_at: datetime | None
    last_changed_at: datetime | None = Field(description="The last check whose judged value changed.")
    consecutive_failures: int = Field(description="Failed checks since the last success (the 5th disables).")
    next_check_at: datetime = Field(description="When it is due (the interval, or the failure backoff).")
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, record: WatcherRecord) -> WatcherOut:
        return cls.model_validate(_view(record))


class WatcherAdminOut(WatcherOut):
    user_id: str

    @classmethod
    def of(cls, record: WatcherRecord) -> WatcherAdminOut:
        return cls.model_validate({"user_id": record.user_id, **_view(record)})


def _view(record: WatcherRecord) -> dict[str, object]:
    spec = record.spec
    return {
        "id": record.id,
        "name": spec.name,
        "agent_id": spec.agent_id,
        "url": spec.url,
        "method": spec.method,
        "headers": [HeaderModel(key=h.key, value=h.value) for h in mask_headers(spec.headers)],
        "body_length": body_length(spec.body),
        "interval_minutes": spec.interval_minutes,
        "compare_mode": spec.compare_mode,
        "json_path": spec.json_path,
        "prompt_template": spec.prompt_template,
        "status": record.status,
        "has_baseline": record.last_value_hash is not None,
        "last_checked_at": record.last_checked_at,
        "last_changed_at": record.last_changed_at,
        "consecutive_failures": record.consecutive_failures,
        "next_check_at": record.next_check_at,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


NEXT_CURSOR = "Pass as `cursor` for the next page; null at the end."


class WatcherPage(BaseModel):
    items: list[WatcherOut]
    limit: int
    offset: int
    next_cursor: str | None = Field(description=NEXT_CURSOR)


class AdminWatcherPage(BaseModel):
    items: list[WatcherAdminOut]
    limit: int
    offset: int
    next_cursor: str | None = Field(description=NEXT_CURSOR)


class CheckOut(BaseModel):
    """One check of the watcher: a judged value, or a failure with its stable code."""

    id: uuid.UUID
    checked_at: datetime = Field(description="When the check was written (the database clock).")
    http_status: int | None = Field(description="The target's status; null when no response arrived.")
    value_hash: str | None = Field(description="SHA-256 (hex) of the judged value; null on a failure.")
    changed: bool = Field(description="The judged value differs from the baseline: a run was triggered.")
    trigger_id: uuid.UUID | None = Field(description="The triggered run's id (in `WatcherTriggered`).")
    error_code: str | None = Field(description="The stable failure code (`timeout`, `redirect`, ...).")
    duration_ms: int | None = Field(description="How long the probe took; null when no response arrived.")
    warning: str | None = Field(description="`TRIGGER_RATE_LIMITED`: the fifth or later run within an hour.")

    @classmethod
    def of(cls, row: CheckRow) -> CheckOut:
        return cls.model_validate(row, from_attributes=True)


class CheckPage(BaseModel):
    items: list[CheckOut]
    limit: int
    offset: int
    next_cursor: str | None = Field(description=NEXT_CURSOR)


class TestResultOut(BaseModel):
    """A preview: nothing is written and nothing is published."""

    __test__ = False  # not a pytest test class
    ok: bool
    error_code: str | None
    http_status: int | None
    duration_ms: int | None
    value_hash: str | None
    value_excerpt: str | None
    would_change: bool
    is_baseline: bool
    sample: str | None

    @classmethod
    def of(cls, preview: Preview) -> TestResultOut:
        result, judged = preview.result, preview.result.judged
        return cls(
            ok=judged is not None,
            error_code=result.error_code,
            http_status=result.http_status,
            duration_ms=result.duration_ms,
            value_hash=judged.value_hash if judged else None,
            value_excerpt=judged.excerpt if judged else None,
            would_change=preview.would_change,
            is_baseline=preview.is_baseline,
            sample=result.sample,
        )
