"""SQL of the read-only listings the console shows: a user's materials (newest first, keyset-paged) and the
worker instances with their recorded drain state."""

from __future__ import annotations

import uuid
from datetime import datetime

from media_worker.adapters.repository import material_of
from media_worker.domain.material import Material
from media_worker.service_layer.ports import InstanceRecord
from yovision_platform.storage import DbConnection, Identifier

__all__ = ["PostgresListing"]


class PostgresListing:
    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        self._conn = conn
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
        self, owner: str, limit: int, after: tuple[datetime, uuid.UUID] | None
    ) -> list[Material]:
        if after is None:
            rows = await self._conn.fetch(self._first, owner, limit)
        else:
            rows = await self._conn.fetch(self._next, owner, limit, after[0], after[1])
        return [material_of(r) for r in rows]

    async def instances(self, limit: int) -> list[InstanceRecord]:
        rows = await self._conn.fetch(self._instances, limit)
        return [
            InstanceRecord(r["instance_id"], r["started_at"], r["seen_at"], r["draining"], r["leased_jobs"])
            for r in rows
        ]
