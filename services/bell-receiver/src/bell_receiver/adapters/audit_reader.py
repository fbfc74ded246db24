"""SQL reading ``audit_events`` for the audit read API (`AuditReader`): newest first, keyset-paged,
filtered. Reads committed rows from the pool, outside any unit of work."""

from __future__ import annotations

import json

import asyncpg

from bell_receiver.domain.audit import AuditFilter, Channel, StoredAuditEvent
from bell_receiver.domain.paging import PagePosition
from yovision_platform.storage import Identifier

_COLUMNS = (
    "id, source_system, event_id, event_type, action, actor, tenant_id, site_id, device_id, occurred_at, "
    "received_at, channel, payload, payload_digest AS digest, trace_id"
)
_EQUALS = ("source_system", "event_type", "device_id", "actor")


class PostgresAuditReader:
    def __init__(self, pool: asyncpg.Pool, schema: Identifier) -> None:
        self._pool = pool
        self._table = f"{schema.quoted}.audit_events"

    async def page(
        self, where: AuditFilter, limit: int, after: PagePosition | None
    ) -> list[StoredAuditEvent]:
        """The SQL names only the filters given (so each uses its index); every value is a bound parameter."""
        conditions: list[str] = []
        values: list[object] = []

        def bind(value: object) -> str:
            values.append(value)
            return f"${len(values)}"

        for column in _EQUALS:
            value = getattr(where, column)
            if value is not None:
                conditions.append(f"{column} = {bind(value)}")
        if where.occurred_from is not None:
            conditions.append(f"occurred_at >= {bind(where.occurred_from)}")
        if where.occurred_before is not None:
            conditions.append(f"occurred_at < {bind(where.occurred_before)}")
        if after is not None:
            conditions.append(f"(occurred_at, id) < ({bind(after.occurred_at)}, {bind(after.id)})")
        clause = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        records = await self._pool.fetch(
            f"SELECT {_COLUMNS} FROM {self._table} {clause} "
            f"ORDER BY occurred_at DESC, id DESC LIMIT {bind(limit)}",
            *values,
        )
        return [
            StoredAuditEvent(
                **{
                    **dict(r),
                    "payload": json.loads(r["payload"]),
                    "digest": bytes(r["digest"]),
                    "channel": Channel(r["channel"]),
                }
            )
            for r in records
        ]
