"""SQL for ``audit_events`` (`AuditTrailStore`): append rows, idempotent by ``(source_system, event_id)``."""

from __future__ import annotations

import json
from collections.abc import Sequence

from bell_receiver.domain.audit import AppendOutcome, AppendResult, AuditRow, Channel, check_appendable
from yovision_platform.db import DbConnection, Identifier


class PostgresAuditTrail:
    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        self._conn = conn
        s = schema.quoted
        # One statement: the multi-row insert -- the rows travel as ONE json parameter (one encoder pass
        # instead of a dumps per payload and asyncpg's per-element array encoding) -- and the digests already
        # stored for the ids it skipped. The outer SELECT reads the statement's snapshot, so it sees rows
        # stored before it (not its own).
        self._insert = f"""
            WITH inserted AS (
                INSERT INTO {s}.audit_events
                       (source_system, event_id, event_type, action, actor, tenant_id, site_id, device_id,
                        occurred_at, channel, payload, payload_digest)
                SELECT r.source_system, r.event_id, r.event_type, r.action, r.actor, r.tenant_id, r.site_id,
                       r.device_id, r.occurred_at, $2, r.payload, decode(r.digest, 'hex')
                  FROM jsonb_to_recordset($1::jsonb) AS r(
                       source_system text, event_id uuid, event_type text, action text, actor text,
                       tenant_id text, site_id text, device_id text, occurred_at timestamptz, payload jsonb,
                       digest text)
                ON CONFLICT (source_system, event_id) DO NOTHING
                RETURNING event_id
            )
            SELECT event_id, NULL::bytea AS stored_digest FROM inserted
            UNION ALL
            SELECT a.event_id, a.payload_digest FROM {s}.audit_events a
             WHERE a.source_system = $3 AND a.event_id = ANY($4::uuid[])
        """
        self._digests = f"""
            SELECT event_id, payload_digest FROM {s}.audit_events
             WHERE source_system = $1 AND event_id = ANY($2::uuid[])
        """

    async def append(self, rows: Sequence[AuditRow], channel: Channel) -> list[AppendResult]:
        """Insert rows whose ``(source_system, event_id)`` is new; one result per row, in order, with the
        digest now stored for that id.

        Rows must have distinct event ids and one ``source_system`` (callers resolve repeats within a batch
        first). One statement whatever the row count; a second one only for ids a concurrent request
        stored while this insert ran (its statement snapshot could not see them).
        """
        check_appendable(rows)
        if not rows:
            return []
        source = rows[0].source_system
        document = [
            {
                "source_system": r.source_system,
                "event_id": str(r.event_id),
                "event_type": r.event_type,
                "action": r.action,
                "actor": r.actor,
                "tenant_id": r.tenant_id,
                "site_id": r.site_id,
                "device_id": r.device_id,
                "occurred_at": r.occurred_at.isoformat(),
                "payload": r.payload,
                "digest": r.digest.hex(),
            }
            for r in rows
        ]
        inserted_records = await self._conn.fetch(
            self._insert, json.dumps(document), channel.value, source, [r.event_id for r in rows]
        )
        inserted = {r["event_id"] for r in inserted_records if r["stored_digest"] is None}
        stored = {r["event_id"]: bytes(r["stored_digest"]) for r in inserted_records if r["stored_digest"]}
        raced = [r.event_id for r in rows if r.event_id not in inserted and r.event_id not in stored]
        if raced:
            records = await self._conn.fetch(self._digests, source, raced)
            stored |= {record["event_id"]: bytes(record["payload_digest"]) for record in records}
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
