"""SQL for ``audit_events``: append facts, idempotently by ``(source_system, event_id)``."""

from __future__ import annotations

import enum
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from yovision_platform.db import DbConnection, Identifier


class Channel(enum.StrEnum):
    HTTP_RELAY = "http_relay"
    KAFKA = "kafka"


class AppendOutcome(enum.StrEnum):
    INSERTED = "inserted"
    SAME_DIGEST = "same_digest"
    OTHER_DIGEST = "other_digest"


@dataclass(frozen=True)
class AppendResult:
    outcome: AppendOutcome
    stored_digest: bytes


@dataclass(frozen=True)
class AuditRow:
    source_system: str
    event_id: uuid.UUID
    event_type: str
    action: str
    actor: str | None
    tenant_id: str | None
    site_id: str | None
    device_id: str | None
    occurred_at: datetime
    payload: Mapping[str, Any]
    digest: bytes


class AuditTrail:
    def __init__(self, schema: Identifier) -> None:
        s = schema.quoted
        self._insert = f"""
            INSERT INTO {s}.audit_events (source_system, event_id, event_type, action, actor, tenant_id,
                                          site_id, device_id, occurred_at, channel, payload, payload_digest)
            SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[],
                                 $7::text[], $8::text[], $9::timestamptz[], $10::text[], $11::jsonb[],
                                 $12::bytea[])
            ON CONFLICT (source_system, event_id) DO NOTHING
            RETURNING event_id
        """
        self._digests = f"""
            SELECT event_id, payload_digest FROM {s}.audit_events
             WHERE source_system = $1 AND event_id = ANY($2::uuid[])
        """

    async def append(
        self, conn: DbConnection, rows: Sequence[AuditRow], channel: Channel
    ) -> list[AppendResult]:
        """Insert rows whose ``(source_system, event_id)`` is new; one result per row, in order, with the
        digest now stored for that id.

        Rows must have distinct ``(source_system, event_id)`` and one ``source_system`` (callers resolve
        repeats within a batch first). Runs two statements whatever the row count.
        """
        if not rows:
            return []
        source = rows[0].source_system
        if any(row.source_system != source for row in rows):
            raise ValueError("append takes rows of one source_system")
        inserted_records = await conn.fetch(
            self._insert,
            [r.source_system for r in rows],
            [r.event_id for r in rows],
            [r.event_type for r in rows],
            [r.action for r in rows],
            [r.actor for r in rows],
            [r.tenant_id for r in rows],
            [r.site_id for r in rows],
            [r.device_id for r in rows],
            [r.occurred_at for r in rows],
            [channel.value] * len(rows),
            [json.dumps(r.payload, sort_keys=True) for r in rows],
            [r.digest for r in rows],
        )
        inserted = {record["event_id"] for record in inserted_records}
        existing_ids = [r.event_id for r in rows if r.event_id not in inserted]
        stored: dict[uuid.UUID, bytes] = {}
        if existing_ids:
            records = await conn.fetch(self._digests, source, existing_ids)
            stored = {record["event_id"]: bytes(record["payload_digest"]) for record in records}
        results: list[AppendResult] = []
        for row in rows:
            if row.event_id in inserted:
                results.append(AppendResult(AppendOutcome.INSERTED, row.digest))
                continue
            known = stored[row.event_id]
            same = known == row.digest
            results.append(
                AppendResult(AppendOutcome.SAME_DIGEST if same else AppendOutcome.OTHER_DIGEST, known)
            )
        return results
