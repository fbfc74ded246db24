"""SQL for ``notifications`` and ``notification_reads`` (`InboxStore`): the per-user inbox, newest first,
keyset-paged, and its read marks."""

from __future__ import annotations

import json

from bell_receiver.domain.inbox import NewNotification, NotificationRow
from bell_receiver.domain.paging import PagePosition
from yovision_platform.storage import DbConnection, Identifier


class PostgresInbox:
    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        self._conn = conn
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

    async def add(self, notification: NewNotification) -> None:
        await self._conn.execute(
            self._insert,
            notification.user_id,
            notification.kind,
            notification.source_system,
            notification.event_id,
            notification.occurred_at,
            json.dumps(notification.data, sort_keys=True),
        )

    async def page(self, user_id: str, limit: int, after: PagePosition | None) -> list[NotificationRow]:
        if after is None:
            records = await self._conn.fetch(self._first_page, user_id, limit)
        else:
            records = await self._conn.fetch(self._next_page, user_id, limit, after.occurred_at, after.id)
        return [NotificationRow(**{**dict(r), "data": json.loads(r["data"])}) for r in records]

    async def set_read(self, user_id: str, notification_id: int, *, read: bool) -> bool:
        if not await self._conn.fetchval(self._owned, notification_id, user_id):
            return False
        await self._conn.execute(self._mark_read if read else self._mark_unread, notification_id, user_id)
        return True
