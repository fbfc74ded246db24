"""``GET /v1/notifications``: the caller's inbox, newest first, keyset-paged; ``PUT`` / ``DELETE
/v1/notifications/{id}/read`` mark one read / unread.

Identity: a bearer JWT (audience ``bell-receiver``) verified by ``yovision_platform.auth.TokenVerifier``;
``sub`` is the user id, and a user only ever sees rows with their own ``user_id``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

import asyncpg
from fastapi import FastAPI, Path, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from bell_receiver.adapters.inbox import Inbox, NotificationRow, PagePosition
from yovision_platform import paging
from yovision_platform.auth import (
    Caller,
    Identity,
    TokenVerifier,
    use_token_verifier,
)
from yovision_platform.db import Identifier
from yovision_platform.paging import InvalidCursor
from yovision_platform.problems import problem_response

NOTIFICATIONS_PATH = "/v1/notifications"
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
MAX_CURSOR_CHARS = 64
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


def encode_cursor(position: PagePosition) -> str:
    return paging.encode_cursor(position.occurred_at, position.id)


def decode_cursor(cursor: str) -> PagePosition:
    if len(cursor) > MAX_CURSOR_CHARS:
        raise InvalidCursor
    return PagePosition(*paging.decode_cursor(cursor, int))


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


def install_notification_routes(
    app: FastAPI, *, pool: asyncpg.Pool, schema: str, verifier: TokenVerifier
) -> None:
    inbox = Inbox(Identifier(schema))

    use_token_verifier(app, verifier)

    @app.get(
        NOTIFICATIONS_PATH,
        operation_id="listNotifications",
        summary="The caller's notifications, newest first",
        response_model=NotificationPage,
        responses={400: {"description": "invalid_cursor"}, 401: {"description": "unauthorized"}},
        tags=["notifications"],
    )
    async def list_notifications(
        user: Caller,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
        cursor: Annotated[str | None, paging.cursor_query(int, max_length=MAX_CURSOR_CHARS)] = None,
    ) -> NotificationPage | JSONResponse:
        try:
            after = decode_cursor(cursor) if cursor is not None else None
        except InvalidCursor:
            return problem_response(400, "invalid_cursor")
        async with pool.acquire() as conn:
            rows = await inbox.page(conn, user.subject, limit + 1, after)
        more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = encode_cursor(PagePosition(rows[-1].occurred_at, rows[-1].id)) if more else None
        return NotificationPage(items=[_item(r) for r in rows], next_cursor=next_cursor)

    async def set_read(user: Identity, notification_id: int, *, read: bool) -> Response:
        async with pool.acquire() as conn:
            found = await inbox.set_read(conn, user.subject, notification_id, read=read)
        return Response(status_code=204) if found else problem_response(404, "not_found")

    read_responses: dict[int | str, dict[str, Any]] = {
        204: {"description": "Done (idempotent)."},
        401: {"description": "unauthorized"},
        404: {"description": "not_found: the caller has no such notification"},
    }

    @app.put(
        f"{NOTIFICATIONS_PATH}/{{notification_id}}/read",
        operation_id="markNotificationRead",
        summary="Mark one of the caller's notifications read",
        status_code=204,
        response_class=Response,
        responses=read_responses,
        tags=["notifications"],
    )
    async def mark_read(user: Caller, notification_id: NotificationId) -> Response:
        return await set_read(user, notification_id, read=True)

    @app.delete(
        f"{NOTIFICATIONS_PATH}/{{notification_id}}/read",
        operation_id="markNotificationUnread",
        summary="Mark one of the caller's notifications unread",
        status_code=204,
        response_class=Response,
        responses=read_responses,
        tags=["notifications"],
    )
    async def mark_unread(user: Caller, notification_id: NotificationId) -> Response:
        return await set_read(user, notification_id, read=False)
