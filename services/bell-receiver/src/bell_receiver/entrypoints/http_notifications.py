"""``GET /v1/notifications``: the caller's inbox, newest first, keyset-paged; ``PUT`` / ``DELETE
/v1/notifications/{id}/read`` mark one read / unread.

Identity: an access token of the OpenID provider (audience ``bell-receiver``, no permission needed), checked
by ``AccessTokenCaller``; its ``sub`` is the user id, and a user only ever sees rows with their own
``user_id``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from bell_receiver.domain.inbox import NotificationRow
from bell_receiver.domain.paging import MAX_CURSOR_CHARS, decode_cursor, next_cursor
from bell_receiver.entrypoints.dependencies import UseCases
from yovision_platform import web
from yovision_platform.web import AccessTokenCaller

NOTIFICATIONS_PATH = "/v1/notifications"
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
MAX_NOTIFICATION_ID = 2**63 - 1
NotificationId = Annotated[int, Path(ge=1, le=MAX_NOTIFICATION_ID)]


class Notification(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    kind: str = Field(description="Inbox kind, e.g. WATCHER_DISABLED.")
    occurred_at: datetime
    source_system: str
    event_id: uuid.UUID
    data: dict[str, str | int | None] = Field(description="Kind-specific fields; never secrets.")
    read_at: datetime | None = Field(default=None, description="When the user marked it read; null: unread.")


class NotificationPage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[Notification]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next (older) page; null at the end."
    )


def _item(row: NotificationRow) -> Notification:
    return Notification(
        id=str(row.id),
        kind=row.kind,
        occurred_at=row.occurred_at,
        source_system=row.source_system,
        event_id=row.event_id,
        data=dict(row.data),
        read_at=row.read_at,
    )


router = APIRouter(tags=["notifications"])

MARK_PATH = f"{NOTIFICATIONS_PATH}/{{notification_id}}/read"
MARK_RESPONSES: dict[int | str, dict[str, Any]] = {
    204: {"description": "Done (idempotent)."},
    401: {"description": "unauthorized"},
    404: {"description": "not_found: the caller has no such notification"},
}


@router.get(
    NOTIFICATIONS_PATH,
    operation_id="listNotifications",
    summary="The caller's notifications, newest first",
    response_model=NotificationPage,
    responses={400: {"description": "invalid_cursor"}, 401: {"description": "unauthorized"}},
)
async def list_notifications(
    user: AccessTokenCaller,
    use_cases: UseCases,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, web.cursor_query(int, max_length=MAX_CURSOR_CHARS)] = None,
) -> NotificationPage:
    after = decode_cursor(cursor) if cursor is not None else None
    page = await use_cases.notifications.page(user.subject, limit, after)
    return NotificationPage(items=[_item(r) for r in page.items], next_cursor=next_cursor(page))


@router.put(
    MARK_PATH,
    operation_id="markNotificationRead",
    summary="Mark one of the caller's notifications read",
    status_code=204,
    response_class=Response,
    responses=MARK_RESPONSES,
)
async def mark_read(
    user: AccessTokenCaller, use_cases: UseCases, notification_id: NotificationId
) -> Response:
    await use_cases.notifications.mark(user.subject, notification_id, read=True)
    return Response(status_code=204)


@router.delete(
    MARK_PATH,
    operation_id="markNotificationUnread",
    summary="Mark one of the caller's notifications unread",
    status_code=204,
    response_class=Response,
    responses=MARK_RESPONSES,
)
async def mark_unread(
    user: AccessTokenCaller, use_cases: UseCases, notification_id: NotificationId
) -> Response:
    await use_cases.notifications.mark(user.subject, notification_id, read=False)
    return Response(status_code=204)
