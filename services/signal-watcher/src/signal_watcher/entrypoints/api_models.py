"""Request and response bodies of the signal-watcher API. Responses never carry secrets: sensitive header
values are masked and the body is shown only by its length."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from signal_watcher.adapters.repository import CheckRow, WatcherRecord
from signal_watcher.domain.masking import body_length, mask_headers
from signal_watcher.domain.model import MAX_HEADERS, CompareMode, Method, Status
from signal_watcher.domain.ssrf import PORT_MAX, PORT_MIN, URL_MAX_CHARS

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


class HeaderModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str
    value: str


class WatcherIn(BaseModel):
    """Create, or replace on update. On update, a sensitive header sent with the masked value `******`
    keeps its stored value, and an absent `body` keeps the stored body (`null` removes it)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    agent_id: str
    url: str = Field(
        description=(
            f"http or https, at most {URL_MAX_CHARS} characters, no userinfo, port {PORT_MIN}..{PORT_MAX} "
            "(1 to 5 ASCII digits; else 422 `url_port_invalid`); the SSRF guard refuses non-public hosts "
            "(422 `ssrf_*`)."
        )
    )
    method: Method = Method.GET
    headers: list[HeaderModel] = Field(default_factory=list, max_length=MAX_HEADERS)
    body: str | None = None
    interval_minutes: int = 15
    compare_mode: CompareMode = CompareMode.HASH
    json_path: str | None = None
    prompt_template: str


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
    interval_minutes: int
    compare_mode: CompareMode
    json_path: str | None
    prompt_template: str
    status: Status
    has_baseline: bool
    last_checked_at: datetime | None
    last_changed_at: datetime | None
    consecutive_failures: int
    next_check_at: datetime
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


class WatcherPage(BaseModel):
    items: list[WatcherOut]
    limit: int
    offset: int


class AdminWatcherPage(BaseModel):
    items: list[WatcherAdminOut]
    limit: int
    offset: int


class CheckOut(BaseModel):
    id: uuid.UUID
    checked_at: datetime
    http_status: int | None
    value_hash: str | None
    changed: bool
    trigger_id: uuid.UUID | None
    error_code: str | None
    duration_ms: int | None
    warning: str | None

    @classmethod
    def of(cls, row: CheckRow) -> CheckOut:
        return cls(
            id=row.id,
            checked_at=row.checked_at,
            http_status=row.http_status,
            value_hash=row.value_hash,
            changed=row.changed,
            trigger_id=row.trigger_id,
            error_code=row.error_code,
            duration_ms=row.duration_ms,
            warning=row.warning,
        )


class CheckPage(BaseModel):
    items: list[CheckOut]
    limit: int
    offset: int


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
