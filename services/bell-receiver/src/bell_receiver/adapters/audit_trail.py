"""SQL for ``audit_events`` (`AuditTrailStore`): append rows, idempotent by ``(source_system, event_id)``."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Sequence

import orjson

from bell_receiver.domain.audit import AppendOutcome, AppendResult, AuditRow, Channel, check_appendable
from yovision_platform.storage import DbConnection, Identifier


class PostgresAuditTrail:
    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        self._conn = conn
        s = schema.quoted
        # One statement: the multi-row insert -- the rows travel as ONE json parameter (one encoder pass
        # instead of a dumps per payload and asyncpg's per-element array encoding) -- and the digests already
        # stored for the ids it skipped. The outer SELECT reads the statement's snapshot, so it sees rows
        # stored before it (not its own). It runs only when the insert skipped an id (a one-time filter): on
        # a young table's statistics PostgreSQL read it through the (source_system, ...) index, every stored
        # Sense row per batch, the time growing with the trail even when nothing was skipped.
        self._insert = f"""
            WITH inserted AS (
                INSERT INTO {s}.audit_events
                       (source_system, event_id, event_type, action, actor, tenant_id, site_id, device_id,
                        occurred_at, channel, payload, payload_digest, trace_id)
                SELECT r.source_system, r.event_id, r.event_type, r.action, r.actor, r.tenant_id, r.site_id,
                       r.device_id, r.occurred_at, $2, r.payload, decode(r.digest, 'hex'), r.trace_id
                  FROM jsonb_to_recordset($1::jsonb) AS r(
                       source_system text, event_id uuid, event_type text, action text, actor text,
                       tenant_id text, site_id text, device_id text, occurred_at timestamptz, payload jsonb,
                       digest text, trace_id text)
                ON CONFLICT (source_system, event_id) DO NOTHING
                RETURNING event_id
            )
            SELECT event_id, NULL::bytea AS stored_digest FROM inserted
            UNION ALL
            SELECT a.event_id, a.payload_digest FROM {s}.audit_events a
             WHERE (SELECT count(*) FROM inserted) < cardinality($4::uuid[])
               AND a.source_system = $3 AND a.event_id = ANY($4::uuid[])
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
        records = await self._conn.fetch(
            self._insert, _rows_json(rows), channel.value, source, [r.event_id for r in rows]
        )
        # event id -> the digest stored before this statement, or None where this statement inserted it
        found: dict[uuid.UUID, bytes | None] = {
            r["event_id"]: None if r["stored_digest"] is None else bytes(r["stored_digest"]) for r in records
        }
        raced = [r.event_id for r in rows if r.event_id not in found]
        if raced:
            records = await self._conn.fetch(self._digests, source, raced)
            found |= {record["event_id"]: bytes(record["payload_digest"]) for record in records}
        results: list[AppendResult] = []
        for row in rows:
            known = found[row.event_id]
            if known is None:
                results.append(AppendResult(AppendOutcome.INSERTED, row.digest))
            elif known == row.digest:
                results.append(AppendResult(AppendOutcome.SAME_DIGEST, known))
            else:
                results.append(AppendResult(AppendOutcome.OTHER_DIGEST, known))
        return results


def _digest_hex(value: object) -> str:
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError


def _rows_json(rows: Sequence[AuditRow]) -> str:
    """The rows as one JSON array of objects named as `AuditRow`'s fields (orjson writes a dataclass as
    such an object, the UUID and the time as text, the digest as hex through `_digest_hex`). The stdlib
    writes what orjson cannot (an integer beyond 64 bits in another service's event); PostgreSQL reads the
    same values from either text."""
    try:
        return orjson.dumps(rows, default=_digest_hex).decode("utf-8")
    except orjson.JSONEncodeError:
        return json.dumps(
            [
                {
                    **{f.name: getattr(row, f.name) for f in dataclasses.fields(row)},
                    "event_id": str(row.event_id),
                    "occurred_at": row.occurred_at.isoformat(),
                    "digest": row.digest.hex(),
                }
                for row in rows
            ]
        )
