"""SQL for the `signal` schema: watchers (secrets encrypted) and their check rows.

Every user-facing method takes the caller's `user_id` and filters by it; a watcher of another user is
simply not found. Scheduler methods (`claim_due`, `load`, `record_check`) are fenced by the watcher lease.
User edits clear the lease, so a probe that was in flight during an edit, status change or delete loses
its lease and writes nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from signal_watcher.adapters.crypto import SecretCipher, SecretUnreadable
from signal_watcher.domain.model import CompareMode, Method, Status, WatcherSpec
from yovision_platform.db import DbConnection, Identifier
from yovision_platform.leases import ClaimedRow, Lease, LeaseTable

__all__ = ["CheckRow", "Position", "WatcherRecord", "WatcherRepository"]

_WATCHER_COLUMNS = """
    id, user_id, agent_id, name, url, method, headers_ciphertext, body_ciphertext, body_length,
    interval_minutes, compare_mode, json_path, prompt_template, status, last_value_hash, last_value_excerpt,
    last_checked_at, last_changed_at, consecutive_failures, next_check_at, created_at, updated_at
"""
_CHECK_COLUMNS = """
    id, watcher_id, checked_at, http_status, value_hash, changed, trigger_id, error_code, duration_ms, warning
"""
# SET expressions see the row before the update: "was DISABLED and becomes ACTIVE".
_REENABLE = "(status = 'DISABLED' AND $3 = 'ACTIVE')"
_CLEAR_LEASE = "lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL"

Position = tuple[datetime, uuid.UUID]  # a keyset position: (created_at or checked_at, id)


@dataclass(frozen=True)
class WatcherRecord:
    id: uuid.UUID
    user_id: str
    spec: WatcherSpec
    status: Status
    last_value_hash: str | None
    last_value_excerpt: str | None
    last_checked_at: datetime | None
    last_changed_at: datetime | None
    consecutive_failures: int
    next_check_at: datetime
    created_at: datetime
    updated_at: datetime
    # set (a stable code) when the secrets could not be decrypted; headers and body are then empty
    secrets_error: str | None = None


@dataclass(frozen=True)
class CheckRow:
    id: uuid.UUID
    watcher_id: uuid.UUID
    checked_at: datetime
    http_status: int | None
    value_hash: str | None
    changed: bool
    trigger_id: uuid.UUID | None
    error_code: str | None
    duration_ms: int | None
    warning: str | None


class WatcherRepository:
    def __init__(self, schema: Identifier, cipher: SecretCipher) -> None:
        self.schema = schema
        self._cipher = cipher
        self._watchers = f"{schema.quoted}.watchers"
        self._checks = f"{schema.quoted}.checks"
        self.leases = LeaseTable(schema, Identifier("watchers"))

    def _record(
        self, row: asyncpg.Record | dict[str, Any], *, tolerate_unreadable: bool = False
    ) -> WatcherRecord:
        """The watcher with its secrets decrypted. SecretUnreadable when they cannot be, unless
        `tolerate_unreadable`: then the record carries the code in `secrets_error` and no secrets."""
        wid = str(row["id"])
        body = row["body_ciphertext"]
        secrets_error = None
        try:
            headers = self._cipher.decrypt_headers(bytes(row["headers_ciphertext"]), watcher_id=wid)
            body_text = None if body is None else self._cipher.decrypt_body(bytes(body), watcher_id=wid)
        except SecretUnreadable as exc:
            if not tolerate_unreadable:
                raise
            headers, body_text, secrets_error = (), None, exc.code
        spec = WatcherSpec(
            name=row["name"],
            agent_id=row["agent_id"],
            url=row["url"],
            method=Method(row["method"]),
            headers=headers,
            body=body_text,
            interval_minutes=row["interval_minutes"],
            compare_mode=CompareMode(row["compare_mode"]),
            json_path=row["json_path"],
            prompt_template=row["prompt_template"],
        )
        return WatcherRecord(
            id=row["id"],
            user_id=row["user_id"],
            spec=spec,
            status=Status(row["status"]),
            last_value_hash=row["last_value_hash"],
            last_value_excerpt=row["last_value_excerpt"],
            last_checked_at=row["last_checked_at"],
            last_changed_at=row["last_changed_at"],
            consecutive_failures=row["consecutive_failures"],
            next_check_at=row["next_check_at"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            secrets_error=secrets_error,
        )

    def _secret_params(
        self, watcher_id: uuid.UUID, spec: WatcherSpec
    ) -> tuple[bytes, bytes | None, int | None]:
        wid = str(watcher_id)
        headers = self._cipher.encrypt_headers(spec.headers, watcher_id=wid)
        if spec.body is None:
            return headers, None, None
        return headers, self._cipher.encrypt_body(spec.body, watcher_id=wid), len(spec.body.encode())

    # --- user-facing -------------------------------------------------------------------------------------

    async def lock_user(self, conn: DbConnection, user_id: str) -> None:
        """Serialize creates of one user (the per-user cap is counted under this transaction lock)."""
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"{self.schema}:watchers:{user_id}"
        )

    async def count_for_user(self, conn: DbConnection, user_id: str) -> int:
        count: int = await conn.fetchval(f"SELECT count(*) FROM {self._watchers} WHERE user_id = $1", user_id)
        return count

    async def insert(self, conn: DbConnection, user_id: str, spec: WatcherSpec) -> WatcherRecord:
        watcher_id = uuid.uuid4()
        headers, body, body_length = self._secret_params(watcher_id, spec)
        row = await conn.fetchrow(
            f"""
            INSERT INTO {self._watchers} (id, user_id, agent_id, name, url, method, headers_ciphertext,
                body_ciphertext, body_length, interval_minutes, compare_mode, json_path, prompt_template)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
            RETURNING {_WATCHER_COLUMNS}
            """,
            watcher_id,
            user_id,
            spec.agent_id,
            spec.name,
            spec.url,
            spec.method.value,
            headers,
            body,
            body_length,
            spec.interval_minutes,
            spec.compare_mode.value,
            spec.json_path,
            spec.prompt_template,
        )
        assert row is not None
        return self._record(row)

    async def get(self, conn: DbConnection, user_id: str, watcher_id: uuid.UUID) -> WatcherRecord | None:
        row = await conn.fetchrow(
            f"SELECT {_WATCHER_COLUMNS} FROM {self._watchers} WHERE id = $1 AND user_id = $2",
            watcher_id,
            user_id,
        )
        return None if row is None else self._record(row)

    async def list_for_user(
        self, conn: DbConnection, user_id: str, *, limit: int, offset: int = 0, after: Position | None = None
    ) -> list[WatcherRecord]:
        """Oldest first by (created_at, id); ``after``: rows strictly after that position (keyset)."""
        keyset = "AND (created_at, id) > ($4, $5)" if after else ""
        rows = await conn.fetch(
            f"""SELECT {_WATCHER_COLUMNS} FROM {self._watchers} WHERE user_id = $1 {keyset}
                ORDER BY created_at, id LIMIT $2 OFFSET $3""",
            user_id,
            limit,
            offset,
            *(after or ()),
        )
        return [self._record(r) for r in rows]

    async def list_all(
        self, conn: DbConnection, *, limit: int, offset: int = 0, after: Position | None = None
    ) -> list[WatcherRecord]:
        keyset = "WHERE (created_at, id) > ($3, $4)" if after else ""
        rows = await conn.fetch(
            f"""SELECT {_WATCHER_COLUMNS} FROM {self._watchers} {keyset}
                ORDER BY created_at, id LIMIT $1 OFFSET $2""",
            limit,
            offset,
            *(after or ()),
        )
        return [self._record(r) for r in rows]

    async def update_spec(
        self,
        conn: DbConnection,
        user_id: str,
        watcher_id: uuid.UUID,
        spec: WatcherSpec,
        *,
        reset_baseline: bool,
    ) -> WatcherRecord | None:
        headers, body, body_length = self._secret_params(watcher_id, spec)
        row = await conn.fetchrow(
            f"""
            UPDATE {self._watchers}
               SET agent_id = $3, name = $4, url = $5, method = $6, headers_ciphertext = $7,
                   body_ciphertext = $8, body_length = $9, interval_minutes = $10, compare_mode = $11,
                   json_path = $12, prompt_template = $13, updated_at = now(), {_CLEAR_LEASE},
                   last_value_hash = CASE WHEN $14 THEN NULL ELSE last_value_hash END,
                   last_value_excerpt = CASE WHEN $14 THEN NULL ELSE last_value_excerpt END,
                   last_changed_at = CASE WHEN $14 THEN NULL ELSE last_changed_at END
             WHERE id = $1 AND user_id = $2
         RETURNING {_WATCHER_COLUMNS}
            """,
            watcher_id,
            user_id,
            spec.agent_id,
            spec.name,
            spec.url,
            spec.method.value,
            headers,
            body,
            body_length,
            spec.interval_minutes,
            spec.compare_mode.value,
            spec.json_path,
            spec.prompt_template,
            reset_baseline,
        )
        return None if row is None else self._record(row)

    async def set_status(
        self, conn: DbConnection, user_id: str, watcher_id: uuid.UUID, status: Status
    ) -> WatcherRecord | None:
        """Re-enabling a DISABLED watcher resets its failures and baseline and makes it due now."""
        row = await conn.fetchrow(
            f"""
            UPDATE {self._watchers}
               SET status = $3, updated_at = now(), {_CLEAR_LEASE},
                   consecutive_failures = CASE WHEN {_REENABLE} THEN 0 ELSE consecutive_failures END,
                   last_value_hash = CASE WHEN {_REENABLE} THEN NULL ELSE last_value_hash END,
                   last_value_excerpt = CASE WHEN {_REENABLE} THEN NULL ELSE last_value_excerpt END,
                   last_changed_at = CASE WHEN {_REENABLE} THEN NULL ELSE last_changed_at END,
                   next_check_at = CASE WHEN {_REENABLE} THEN now() ELSE next_check_at END
             WHERE id = $1 AND user_id = $2
         RETURNING {_WATCHER_COLUMNS}
            """,
            watcher_id,
            user_id,
            status.value,
        )
        return None if row is None else self._record(row)

    async def request_check(
        self, conn: DbConnection, user_id: str, watcher_id: uuid.UUID, *, min_spacing_seconds: float
    ) -> WatcherRecord | None:
        """Make an ACTIVE watcher due now, unless its last check is less than ``min_spacing_seconds`` old
        (database clock). None when nothing changed: not the caller's, not active, or checked too recently."""
        row = await conn.fetchrow(
            f"""
            UPDATE {self._watchers}
               SET next_check_at = least(next_check_at, now()), updated_at = now()
             WHERE id = $1 AND user_id = $2 AND status = 'ACTIVE'
               AND (last_checked_at IS NULL OR last_checked_at <= now() - make_interval(secs => $3))
         RETURNING {_WATCHER_COLUMNS}
            """,
            watcher_id,
            user_id,
            min_spacing_seconds,
        )
        return None if row is None else self._record(row)

    async def delete(self, conn: DbConnection, user_id: str, watcher_id: uuid.UUID) -> bool:
        status = await conn.execute(
            f"DELETE FROM {self._watchers} WHERE id = $1 AND user_id = $2", watcher_id, user_id
        )
        return bool(status == "DELETE 1")

    async def list_checks(
        self,
        conn: DbConnection,
        watcher_id: uuid.UUID,
        *,
        limit: int,
        offset: int = 0,
        before: Position | None = None,
    ) -> list[CheckRow]:
        """Newest first by (checked_at, id); ``before``: rows strictly before that position (keyset)."""
        keyset = "AND (checked_at, id) < ($4, $5)" if before else ""
        rows = await conn.fetch(
            f"""SELECT {_CHECK_COLUMNS} FROM {self._checks} WHERE watcher_id = $1 {keyset}
                ORDER BY checked_at DESC, id DESC LIMIT $2 OFFSET $3""",
            watcher_id,
            limit,
            offset,
            *(before or ()),
        )
        return [CheckRow(**dict(r)) for r in rows]

    # --- scheduler --------------------------------------------------------------------------------------

    async def claim_due(
        self, conn: DbConnection, owner: str, *, limit: int, lease_seconds: float
    ) -> list[ClaimedRow]:
        return await self.leases.claim(
            conn,
            owner,
            lease_seconds=lease_seconds,
            limit=limit,
            due_condition="status = 'ACTIVE' AND next_check_at <= now()",
            order_by="next_check_at, id",
        )

    async def load(self, conn: DbConnection, watcher_id: uuid.UUID, lease: Lease) -> WatcherRecord | None:
        """The leased watcher for its check; secrets that cannot be decrypted are reported in
        `secrets_error` (the check then records that failure instead of probing)."""
        row = await conn.fetchrow(
            f"""SELECT {_WATCHER_COLUMNS} FROM {self._watchers}
                 WHERE id = $1 AND lease_owner = $2 AND lease_token = $3 AND lease_expires_at > now()""",
            watcher_id,
            lease.owner,
            lease.token,
        )
        return None if row is None else self._record(row, tolerate_unreadable=True)

    async def triggers_in_last_hour(self, conn: DbConnection, watcher_id: uuid.UUID) -> int:
        count: int = await conn.fetchval(
            f"""SELECT count(*) FROM {self._checks}
                 WHERE watcher_id = $1 AND trigger_id IS NOT NULL
                   AND checked_at > now() - interval '1 hour'""",
            watcher_id,
        )
        return count

    async def insert_check(self, conn: DbConnection, check: CheckRow) -> None:
        await conn.execute(
            f"INSERT INTO {self._checks} ({_CHECK_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            check.id,
            check.watcher_id,
            check.checked_at,
            check.http_status,
            check.value_hash,
            check.changed,
            check.trigger_id,
            check.error_code,
            check.duration_ms,
            check.warning,
        )

    async def write_result(
        self,
        conn: DbConnection,
        watcher_id: uuid.UUID,
        lease: Lease,
        *,
        now: datetime,
        status: Status,
        failures: int,
        next_check_in_minutes: int,
        baseline_hash: str | None,
        baseline_excerpt: str | None,
        changed: bool,
    ) -> None:
        """Fenced: raises LeaseLost (and writes nothing) when the lease was lost or cleared by an edit."""
        assignments: dict[str, object] = {
            "status": status.value,
            "consecutive_failures": failures,
            "last_checked_at": now,
            "next_check_at": now + timedelta(minutes=next_check_in_minutes),
            "last_value_hash": baseline_hash,
            "last_value_excerpt": baseline_excerpt,
        }
        if changed:
            assignments["last_changed_at"] = now
        await self.leases.fenced_update(conn, watcher_id, lease, assignments)

    async def delete_old_checks(self, conn: DbConnection, *, retention_days: int, batch: int) -> int:
        status = await conn.execute(
            f"""DELETE FROM {self._checks} WHERE id IN (
                    SELECT id FROM {self._checks} WHERE checked_at < now() - make_interval(days => $1)
                     ORDER BY checked_at LIMIT $2)""",
            retention_days,
            batch,
        )
        return int(status.split()[-1])
