"""SQL reading ``audit_events`` for the audit read API: newest first, keyset-paged, filtered."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bell_receiver.adapters.inbox import PagePosition
from yovision_platform.db import DbConnection, Identifier

_COLUMNS = (
    "id, source_system, event_id, event_type, action, actor, tenant_id, site_id, device_id, occurred_at, "
    "received_at, channel, payload"
)


@dataclass(frozen=True)
class AuditFilter:
    source_system: str | None = None
    event_type: str | None = None
    device_id: str | None = None
    actor: str | None = None
    occurred_from: datetime | None = None
    occurred_before: datetime | None = None


@dataclass(frozen=True)
class StoredAuditEvent:
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
    channel: str
    payload: dict[str, Any]


_EQUALS = (
    ("source_system", "source_system"),
    ("event_type", "event_type"),
    ("device_id", "device_id"),
    ("actor", "actor"),
)


class AuditReader:
    def __init__(self, schema: Identifier) -> None:
        self._table = f"{schema.quoted}.audit_events"

    async def page(
        self, conn: DbConnection, where: AuditFilter, limit: int, after: PagePosition | None
    ) -> list[StoredAuditEvent]:
        """The SQL names only the filters given (so each uses its index); every value is a bound parameter."""
        conditions: list[str] = []
        values: list[object] = []

        def bind(value: object) -> str:
            values.append(value)
            return f"${len(values)}"

        for attribute, column in _EQUALS:
            value = getattr(where, attribute)
            if value is not None:
                conditions.append(f"{column} = {bind(value)}")
        if where.occurred_from is not None:
            conditions.append(f"occurred_at >= {bind(where.occurred_from)}")
        if where.occurred_before is not None:
            conditions.append(f"occurred_at < {bind(where.occurred_before)}")
        if after is not None:
            conditions.append(f"(occurred_at, id) < ({bind(after.occurred_at)}, {bind(after.id)})")
        clause = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        records = await conn.fetch(
            f"SELECT {_COLUMNS} FROM {self._table} {clause} "
            f"ORDER BY occurred_at DESC, id DESC LIMIT {bind(limit)}",
            *values,
        )
        return [StoredAuditEvent(**{**dict(r), "payload": json.loads(r["payload"])}) for r in records]
