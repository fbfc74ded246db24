"""SQL of the read-only listings the console shows: a user's materials (newest first, keyset-paged) and the
worker instances with their recorded drain state."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from yovision_platform.db import DbConnection, Identifier

__all__ = ["MediaListing"]


class MediaListing:
    def __init__(self, schema: Identifier) -> None:
        q = schema.quoted
        self._first = f"""SELECT m.*, now() AS db_now FROM {q}.materials m WHERE m.owner_subject = $1
                           ORDER BY m.created_at DESC, m.id DESC LIMIT $2"""
        self._next = f"""SELECT m.*, now() AS db_now FROM {q}.materials m
                          WHERE m.owner_subject = $1 AND (m.created_at, m.id) < ($3, $4)
                          ORDER BY m.created_at DESC, m.id DESC LIMIT $2"""
        self._instances = f"""
            SELECT i.instance_id, i.started_at, i.seen_at, i.draining,
                   (SELECT count(*) FROM {q}.transcode_jobs j
                     WHERE j.lease_owner = i.instance_id AND j.lease_expires_at > now()
                       AND j.state = 'running') AS leased_jobs
              FROM {q}.instances i ORDER BY i.seen_at DESC, i.instance_id LIMIT $1"""

    async def materials(
        self, conn: DbConnection, owner: str, limit: int, after: tuple[datetime, uuid.UUID] | None
    ) -> list[dict[str, Any]]:
        if after is None:
            rows = await conn.fetch(self._first, owner, limit)
        else:
            rows = await conn.fetch(self._next, owner, limit, after[0], after[1])
        return [dict(r) for r in rows]

    async def instances(self, conn: DbConnection, limit: int) -> list[dict[str, Any]]:
        return [dict(r) for r in await conn.fetch(self._instances, limit)]
