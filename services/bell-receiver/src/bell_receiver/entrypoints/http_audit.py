"""``GET /v1/audit-events``: the global audit trail, newest first, keyset-paged, filtered.

Identity: an access token of the OpenID provider (audience ``bell-receiver``) with the permission
``bell:audit-read``, checked by ``AccessTokenCaller``. Filters: source system, event type, device (the
subject of a device-audit fact), actor and an occurred-at range ``[occurred_from, occurred_before)``. Each
row carries its stored fact, which is redacted at the source: facts name changed fields, never their values.
The ``actor`` of a row is what the event carried, never the reader's token.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from bell_receiver.domain.audit import AuditFilter, StoredAuditEvent
from bell_receiver.domain.paging import MAX_CURSOR_CHARS, decode_cursor, next_cursor
from bell_receiver.entrypoints.dependencies import UseCases
from yovision_platform import web
from yovision_platform.web import AccessTokenCaller, Rfc3339DateTime

AUDIT_EVENTS_PATH = "/v1/audit-events"
AUDIT_READ_PERMISSION = "bell:audit-read"
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
FILTER_MAX_CHARS = 128
FILTER_PATTERN = r"^[A-Za-z0-9._:@-]+$"

Filter = Annotated[str | None, Query(max_length=FILTER_MAX_CHARS, pattern=FILTER_PATTERN)]


class AuditEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: int
    source_system: str
    event_id: uuid.UUID
    event_type: str
    action: str
    actor: str | None
    tenant_id: str | None
    site_id: str | None
    device_id: str | None
    occurred_at: datetime
    received_at: datetime
    channel: str = Field(description="http_relay | kafka")
    fact: dict[str, Any] = Field(description="The stored, redacted fact (field names, never secret values).")
    trace_id: str | None = Field(
        description="The trace the row was stored in (32 lowercase hex; its spans in the trace store), or "
        "null when none came with the event.",
        pattern="^[0-9a-f]{32}$",
    )

    @classmethod
    def of(cls, row: StoredAuditEvent) -> AuditEvent:
        view = {k: v for k, v in vars(row).items() if k not in ("payload", "digest", "channel")}
        return cls(**view, channel=row.channel.value, fact=dict(row.payload))


class AuditEventPage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[AuditEvent]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next (older) page; null at the end."
    )


router = APIRouter()


@router.get(
    AUDIT_EVENTS_PATH,
    operation_id="listAuditEvents",
    summary="The global audit trail, newest first",
    description="Filtered by the given fields and by occurrence time in "
    "`[occurred_from, occurred_before)`; a range that holds no instant (`occurred_from` not before "
    "`occurred_before`) is an empty page.",
    response_model=AuditEventPage,
    responses={
        400: {"description": "invalid_cursor"},
        401: {"description": "unauthorized"},
        403: {"description": f"forbidden: the token lacks `{AUDIT_READ_PERMISSION}`"},
    },
    tags=["audit"],
)
async def list_audit_events(
    caller: AccessTokenCaller,
    use_cases: UseCases,
    source_system: Filter = None,
    event_type: Filter = None,
    device_id: Filter = None,
    actor: Filter = None,
    occurred_from: Rfc3339DateTime | None = None,
    occurred_before: Rfc3339DateTime | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, web.cursor_query(int, max_length=MAX_CURSOR_CHARS)] = None,
) -> AuditEventPage:
    caller.require(AUDIT_READ_PERMISSION)
    after = decode_cursor(cursor) if cursor is not None else None
    where = AuditFilter(source_system, event_type, device_id, actor, occurred_from, occurred_before)
    page = await use_cases.audit_events.page(where, limit, after)
    return AuditEventPage(items=[AuditEvent.of(r) for r in page.items], next_cursor=next_cursor(page))
