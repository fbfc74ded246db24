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
        columns = "id, user_id, kind, source_system, event_id, occurred_at, data"
        self._first_page = f"""
            SELECT {columns} FROM {s}.notifications WHERE user_id = $1
             ORDER BY occurred_at DESC, id DESC LIMIT $2
        """
        self._next_page = f"""
            SELECT {columns} FROM {s}.notifications
             WHERE user_id = $1 AND (occurred_at, id) < ($3, $4)
             ORDER BY occurred_at DESC, id DESC LIMIT $2
        """

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
            )
            for r in records
        ]
