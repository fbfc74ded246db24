"""SQL of scans, findings, apply runs and dispositions (schema `orphan`), each finding and disposition per
(MediaMTX server, path). Times come from the DB clock. The PostgreSQL adapter of
`service_layer.ports.ReportStore`, bound to one connection (a transaction)."""

from __future__ import annotations

import uuid
from datetime import datetime

from orphan_scanner.domain.classify import Classification, PathClass, ServerPath
from orphan_scanner.domain.records import (
    COUNTED_OUTCOMES,
    ApplyEnd,
    ApplyRun,
    Disposition,
    NewReport,
    PathDisposition,
    StoredReport,
)
from yovision_platform.storage import DbConnection, Identifier

# A report's age in whole milliseconds by the database clock, now (not at the start of the transaction).
AGE_MS_SQL = "floor(extract(epoch FROM (clock_timestamp() - created_at)) * 1000)::bigint"


async def load_report(conn: DbConnection, schema: Identifier, scan_id: uuid.UUID) -> StoredReport | None:
    """The report with its findings (ordered by server, then path, by code point) and per-server totals."""
    s = schema.quoted
    row = await conn.fetchrow(
        f"""
        SELECT id AS scan_id, trigger, status, error_code, created_at, expires_at, observed_total,
               in_use_count, owned_stale_count, unowned_count, {AGE_MS_SQL} AS age_ms
          FROM {s}.scan_reports WHERE id = $1
        """,
        scan_id,
    )
    if row is None:
        return None
    findings = await conn.fetch(
        f"SELECT media_server_id, path_name, path_class, device_id FROM {s}.scan_findings "
        'WHERE scan_id = $1 ORDER BY media_server_id COLLATE "C", path_name COLLATE "C"',
        scan_id,
    )
    totals = await conn.fetch(
        f"SELECT media_server_id, observed_total FROM {s}.scan_server_counts WHERE scan_id = $1",
        scan_id,
    )
    return StoredReport(
        **dict(row),
        candidates={
            ServerPath(f["media_server_id"], f["path_name"]): f["device_id"]
            for f in findings
            if f["path_class"] == PathClass.OWNED_STALE
        },
        unowned=[
            ServerPath(f["media_server_id"], f["path_name"])
            for f in findings
            if f["path_class"] == PathClass.UNOWNED
        ],
        server_totals=dict(sorted((t["media_server_id"], t["observed_total"]) for t in totals)),
    )


class PostgresReportStore:
    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        self._conn = conn
        self._schema = schema
        self._s = schema.quoted

    async def insert_complete(
        self, report: NewReport, classification: Classification, media_servers: tuple[str, ...]
    ) -> tuple[datetime, datetime]:
        """Insert a usable report, its findings and its per-server counts (every one of `media_servers`);
        returns (created_at, expires_at) by the DB clock."""
        s = self._s
        scan_id = report.scan_id
        counts = classification.counts()
        row = await self._conn.fetchrow(
            f"""
            INSERT INTO {s}.scan_reports (id, trigger, instance_id, lease_token, status, expires_at,
                                          observed_total, in_use_count, owned_stale_count, unowned_count)
            VALUES ($1, $2, $3, $4, 'complete', now() + interval '15 minutes', $5, $6, $7, $8)
            RETURNING created_at, expires_at
            """,
            scan_id,
            report.trigger,
            report.instance_id,
            report.lease_token,
            classification.observed_total,
            counts[PathClass.IN_USE],
            counts[PathClass.OWNED_STALE],
            counts[PathClass.UNOWNED],
        )
        stale = sorted(classification.owned_stale.items())
        unowned = sorted(classification.unowned)
        paths = [path for path, _ in stale] + unowned
        await self._conn.execute(
            f"""
            INSERT INTO {s}.scan_findings (scan_id, media_server_id, path_name, path_class, device_id)
            SELECT $1, f.media_server_id, f.path_name, f.path_class, f.device_id
              FROM unnest($2::text[], $3::text[], $4::text[], $5::uuid[])
                   AS f(media_server_id, path_name, path_class, device_id)
            """,
            scan_id,
            [path.media_server_id for path in paths],
            [path.path_name for path in paths],
            [PathClass.OWNED_STALE.value] * len(stale) + [PathClass.UNOWNED.value] * len(unowned),
            [device for _, device in stale] + [None] * len(unowned),
        )
        by_server = classification.counts_by_server(media_servers)
        await self._conn.executemany(
            f"""
            INSERT INTO {s}.scan_server_counts (scan_id, media_server_id, observed_total, in_use_count,
                                                owned_stale_count, unowned_count)
            VALUES ($1, $2, $3, $4, $5, $6)
            """,
            [
                (
                    scan_id,
                    server,
                    sum(tally.values()),
                    tally[PathClass.IN_USE],
                    tally[PathClass.OWNED_STALE],
                    tally[PathClass.UNOWNED],
                )
                for server, tally in by_server.items()
            ],
        )
        assert row is not None
        return row["created_at"], row["expires_at"]

    async def insert_failed(self, report: NewReport, error_code: str) -> datetime:
        created_at: datetime = await self._conn.fetchval(
            f"""
            INSERT INTO {self._s}.scan_reports (id, trigger, instance_id, lease_token, status, error_code,
                                                expires_at)
            VALUES ($1, $2, $3, $4, 'failed', $5, now() + interval '15 minutes')
            RETURNING created_at
            """,
            report.scan_id,
            report.trigger,
            report.instance_id,
            report.lease_token,
            error_code,
        )
        return created_at

    async def load(self, scan_id: uuid.UUID) -> StoredReport | None:
        return await load_report(self._conn, self._schema, scan_id)

    async def report_age_ms(self, scan_id: uuid.UUID) -> int:
        age: int = await self._conn.fetchval(
            f"SELECT {AGE_MS_SQL} FROM {self._s}.scan_reports WHERE id = $1",
            scan_id,
        )
        return int(age)

    async def prune(self, *, older_than_hours: int, limit: int = 1000) -> int:
        """Delete old reports no apply ever used (their findings go with them)."""
        status = await self._conn.execute(
            f"""
            DELETE FROM {self._s}.scan_reports r
             WHERE r.id IN (SELECT id FROM {self._s}.scan_reports
                             WHERE created_at < now() - make_interval(hours => $1)
                             ORDER BY created_at LIMIT $2)
               AND NOT EXISTS (SELECT 1 FROM {self._s}.apply_runs a WHERE a.scan_id = r.id)
            """,
            older_than_hours,
            limit,
        )
        return int(status.split()[-1])

    # --- apply runs and dispositions -------------------------------------------------------------------

    async def start_apply(self, run: ApplyRun) -> None:
        await self._conn.execute(
            f"""
            INSERT INTO {self._s}.apply_runs (id, scan_id, actor, instance_id, status, report_candidates)
            VALUES ($1, $2, $3, $4, 'running', $5)
            ON CONFLICT (id) DO NOTHING
            """,
            run.apply_id,
            run.scan_id,
            run.actor,
            run.instance_id,
            run.report_candidates,
        )

    async def finish_apply(self, apply_id: uuid.UUID, end: ApplyEnd) -> None:
        counts = end.counts
        await self._conn.execute(
            f"""
            UPDATE {self._s}.apply_runs
               SET status = $2, reason_code = $3, current_total = $4, current_candidates = $5,
                   deleted_count = $6, absent_count = $7, skipped_count = $8, failed_count = $9,
                   blocked_media_server_id = $10, finished_at = now()
             WHERE id = $1
            """,
            apply_id,
            end.status,
            end.reason_code,
            end.current_total,
            end.current_candidates,
            *(counts.get(outcome, 0) for outcome in COUNTED_OUTCOMES),
            end.blocked_media_server_id,
        )

    async def dispositions(self, scan_id: uuid.UUID) -> dict[ServerPath, Disposition]:
        rows = await self._conn.fetch(
            f"SELECT media_server_id, path_name, outcome, error_code, attempts FROM {self._s}.dispositions "
            "WHERE scan_id = $1",
            scan_id,
        )
        dispositions = {}
        for r in rows:
            path = ServerPath(r["media_server_id"], r["path_name"])
            dispositions[path] = Disposition(path, r["outcome"], r["error_code"], r["attempts"])
        return dispositions

    async def record_disposition(self, disposition: PathDisposition) -> None:
        """Insert or update the path's disposition; a final one is never rewritten (the DB enforces it)."""
        await self._conn.execute(
            f"""
            INSERT INTO {self._s}.dispositions AS d (scan_id, path_name, outcome, error_code, actor, apply_id,
                                                     media_server_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            ON CONFLICT (scan_id, media_server_id, path_name) DO UPDATE
               SET outcome = excluded.outcome, error_code = excluded.error_code, actor = excluded.actor,
                   apply_id = excluded.apply_id, last_attempt_at = now(),
                   attempts = d.attempts + CASE WHEN d.apply_id = excluded.apply_id THEN 0 ELSE 1 END
             WHERE d.outcome NOT IN ('deleted', 'already_absent')
            """,
            disposition.scan_id,
            disposition.path.path_name,
            disposition.outcome,
            disposition.error_code,
            disposition.actor,
            disposition.apply_id,
            disposition.path.media_server_id,
        )

    async def totals(self) -> dict[str, int]:
        """Monotonic totals over every apply run: blocked runs, deleted paths, failed deletes."""
        row = await self._conn.fetchrow(
            f"""
            SELECT count(*) FILTER (WHERE status = 'blocked') AS blocked,
                   coalesce(sum(deleted_count), 0) AS deleted,
                   coalesce(sum(failed_count), 0) AS failed
              FROM {self._s}.apply_runs
            """
        )
        assert row is not None
        return {"blocked": int(row["blocked"]), "deleted": int(row["deleted"]), "failed": int(row["failed"])}

    async def last_complete_counts(self) -> dict[str, dict[str, int]] | None:
        """Per server, the class counts of the last usable report; None before the first one."""
        rows = await self._conn.fetch(
            f"""
            SELECT media_server_id, observed_total, in_use_count, owned_stale_count, unowned_count
              FROM {self._s}.scan_server_counts
             WHERE scan_id = (SELECT id FROM {self._s}.scan_reports WHERE status = 'complete'
                               ORDER BY created_at DESC LIMIT 1)
            """
        )
        if not rows:
            return None
        return {
            row["media_server_id"]: {
                "observed": row["observed_total"],
                "in_use": row["in_use_count"],
                "owned_stale": row["owned_stale_count"],
                "unowned": row["unowned_count"],
            }
            for row in rows
        }
