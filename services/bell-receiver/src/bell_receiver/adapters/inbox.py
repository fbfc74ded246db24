"""SQL for ``notifications``: the per-user inbox, newest first, keyset-paged."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from yovision_platform.db import DbConnection, Identifier


@dataclass(frozen=True)
class NotificationRow:
    id: int
    user_id: str
    kind: str
    source_system: str
    event_id: uuid.UUID
    occurred_at: datetime
    data: Mapping[str, Any]
    read_at: datetime | None = None


@dataclass(frozen=True)
class PagePosition:
    """Keyset position: rows strictly older than (occurred_at, id) come next."""

    occurred_at: datetime
    id: int


class Inbox:
    def __init__(self, schema: Identifier) -> None:
        s = schema.quoted
        self._insert = f"""
            INSERT INTO {s}.notifications (user_id, kind, source_system, event_id, occurred_at, data)
            VALUES ($1, $2, $3, $4, $5, $6::jsonb)
            ON CONFLICT (source_system, event_id) DO NOTHING
        """
        columns = "n.id, n.user_id, n.kind, n.source_system, n.event_id, n.occurred_at, n.data, r.read_at"
        source = f"{s}.notifications n LEFT JOIN {s}.notification_reads r ON r.notification_id = n.id"
        self._first_page = f"""
            SELECT {columns} FROM {source} WHERE n.user_id = $1
             ORDER BY n.occurred_at DESC, n.id DESC LIMIT $2
        """
        self._next_page = f"""
            SELECT {columns} FROM {source}
             WHERE n.user_id = $1 AND (n.occurred_at, n.id) < ($3, $4)
             ORDER BY n.occurred_at DESC, n.id DESC LIMIT $2
        """
        self._mark_read = f"""
            INSERT INTO {s}.notification_reads (notification_id, user_id)
            SELECT id, user_id FROM {s}.notifications WHERE id = $1 AND user_id = $2
            ON CONFLICT (notification_id) DO NOTHING
        """
        self._owned = f"SELECT 1 FROM {s}.notifications WHERE id = $1 AND user_id = $2"
        self._mark_unread = f"DELETE FROM {s}.notification_reads WHERE notification_id = $1 AND user_id = $2"

    async def add(
        self,
        conn: DbConnection,
        *,
        user_id: str,
        kind: str,
        source_system: str,
        event_id: uuid.UUID,
        occurred_at: datetime,
        data: Mapping[str, Any],
    ) -> None:
        await conn.execute(
            self._insert,
            user_id,
            kind,
            source_system,
            event_id,
            occurred_at,
            json.dumps(data, sort_keys=True),
        )

    async def page(
        self, conn: DbConnection, user_id: str, limit: int, after: PagePosition | None
    ) -> list[NotificationRow]:
        if after is None:
            records = await conn.fetch(self._first_page, user_id, limit)
        else:
            records = await conn.fetch(self._next_page, user_id, limit, after.occurred_at, after.id)
        return [
            NotificationRow(
                id=r["id"],
                user_id=r["user_id"],
                kind=r["kind"],
                source_system=r["source_system"],
                event_id=r["event_id"],
                occurred_at=r["occurred_at"],
                data=json.loads(r["data"]),
                read_at=r["read_at"],
            )
            for r in records
        ]

    async def set_read(self, conn: DbConnection, user_id: str, notification_id: int, *, read: bool) -> bool:
        """Mark the user's notification read (idempotent: the first read time stays) or unread; False when
        the user has no such notification."""
        if not await conn.fetchval(self._owned, notification_id, user_id):
            return False
        await conn.execute(self._mark_read if read else self._mark_unread, notification_id, user_id)
        return True
