"""SQL for the `signal` schema: watchers (secrets encrypted) and their check rows, the PostgreSQL adapters
of `WatcherStore` and `CheckStore` (service_layer.ports), each bound to the connection of one unit of work.

Every user-facing method takes the caller's `user_id` and filters by it; a watcher of another user is
simply not found. Scheduler methods (`claim_due`, `write_result`) are fenced by the watcher lease.
User edits clear the lease, so a probe that was in flight during an edit, status change or delete loses
its lease and writes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import asyncpg

from signal_watcher.adapters.crypto import SecretCipher
from signal_watcher.domain.model import CompareMode, Method, Status, WatcherSpec
from signal_watcher.domain.records import CheckRow, Position, WatcherAfterCheck, WatcherRecord
from signal_watcher.service_layer.ports import ClaimedWatcher
from yovision_platform.storage import DbConnection, Identifier, Lease, LeaseTable

__all__ = ["PostgresCheckStore", "PostgresWatcherStore"]

_WATCHER_COLUMNS = """
    id, user_id, agent_id, name, url, method, headers_ciphertext, body_ciphertext, body_length,
    interval_minutes, compare_mode, json_path, prompt_template, status, last_value_hash, last_value_excerpt,
    last_checked_at, last_changed_at, consecutive_failures, next_check_at, created_at, updated_at
"""
_WATCHER_COLUMN_NAMES = tuple(name.strip() for name in _WATCHER_COLUMNS.split(","))
_CHECK_COLUMNS = """
    id, watcher_id, checked_at, http_status, value_hash, changed, trigger_id, error_code, duration_ms, warning
"""
# SET expressions see the row before the update: "was DISABLED and becomes ACTIVE".
_REENABLE = "(status = 'DISABLED' AND $3 = 'ACTIVE')"
_CLEAR_LEASE = "lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL"


class PostgresWatcherStore:
    def __init__(self, conn: DbConnection, schema: Identifier, cipher: SecretCipher) -> None:
        self._conn = conn
        self._schema = schema
        self._cipher = cipher
        self._watchers = f"{schema.quoted}.watchers"
        self._leases = LeaseTable(schema, Identifier("watchers"))

    def _record(
        self, row: asyncpg.Record | Mapping[str, Any], *, tolerate_unreadable: bool = False
    ) -> WatcherRecord:
        body = row["body_ciphertext"]
        secrets = self._cipher.open(
            row["id"],
            bytes(row["headers_ciphertext"]),
            None if body is None else bytes(body),
            tolerate_unreadable=tolerate_unreadable,
        )
        spec = WatcherSpec(
            name=row["name"],
            agent_id=row["agent_id"],
            url=row["url"],
            method=Method(row["method"]),
            headers=secrets.headers,
            body=secrets.body,
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
            secrets_error=secrets.error,
        )

    def _spec_params(self, watcher_id: uuid.UUID, spec: WatcherSpec) -> tuple[object, ...]:
        """$3.. of an insert or update: the definition with its secrets sealed."""
        sealed = self._cipher.seal(watcher_id, spec.headers, spec.body)
        return (
            spec.agent_id,
            spec.name,
            spec.url,
            spec.method.value,
            sealed.headers,
            sealed.body,
            sealed.body_length,
            spec.interval_minutes,
            spec.compare_mode.value,
            spec.json_path,
            spec.prompt_template,
        )

    # --- user-facing -------------------------------------------------------------------------------------

    async def lock_user(self, user_id: str) -> None:
        await self._conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"{self._schema}:watchers:{user_id}"
        )

    async def count_for_user(self, user_id: str) -> int:
        count: int = await self._conn.fetchval(
            f"SELECT count(*) FROM {self._watchers} WHERE user_id = $1", user_id
        )
        return count

    async def insert(self, user_id: str, spec: WatcherSpec) -> WatcherRecord:
        watcher_id = uuid.uuid4()
        row = await self._conn.fetchrow(
            f"""
            INSERT INTO {self._watchers} (id, user_id, agent_id, name, url, method, headers_ciphertext,
                body_ciphertext, body_length, interval_minutes, compare_mode, json_path, prompt_template)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
            RETURNING {_WATCHER_COLUMNS}
            """,
            watcher_id,
            user_id,
            *self._spec_params(watcher_id, spec),
        )
        assert row is not None
        return self._record(row)

    async def get(self, user_id: str, watcher_id: uuid.UUID) -> WatcherRecord | None:
        row = await self._conn.fetchrow(
            f"SELECT {_WATCHER_COLUMNS} FROM {self._watchers} WHERE id = $1 AND user_id = $2",
            watcher_id,
            user_id,
        )
        return None if row is None else self._record(row)

    async def list_for_user(
        self, user_id: str, *, limit: int, offset: int = 0, after: Position | None = None
    ) -> list[WatcherRecord]:
        keyset = "AND (created_at, id) > ($4, $5)" if after else ""
        rows = await self._conn.fetch(
            f"""SELECT {_WATCHER_COLUMNS} FROM {self._watchers} WHERE user_id = $1 {keyset}
                ORDER BY created_at, id LIMIT $2 OFFSET $3""",
            user_id,
            limit,
            offset,
            *(after or ()),
        )
        return [self._record(r) for r in rows]

    async def list_all(
        self, *, limit: int, offset: int = 0, after: Position | None = None
    ) -> list[WatcherRecord]:
        keyset = "WHERE (created_at, id) > ($3, $4)" if after else ""
        rows = await self._conn.fetch(
            f"""SELECT {_WATCHER_COLUMNS} FROM {self._watchers} {keyset}
                ORDER BY created_at, id LIMIT $1 OFFSET $2""",
            limit,
            offset,
            *(after or ()),
        )
        return [self._record(r) for r in rows]

    async def update_spec(
        self, user_id: str, watcher_id: uuid.UUID, spec: WatcherSpec, *, reset_baseline: bool
    ) -> WatcherRecord | None:
        row = await self._conn.fetchrow(
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
            *self._spec_params(watcher_id, spec),
            reset_baseline,
        )
        return None if row is None else self._record(row)

    async def set_status(self, user_id: str, watcher_id: uuid.UUID, status: Status) -> WatcherRecord | None:
        row = await self._conn.fetchrow(
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
        self, user_id: str, watcher_id: uuid.UUID, *, min_spacing_seconds: float
    ) -> WatcherRecord | None:
        row = await self._conn.fetchrow(
            f"""
            UPDATE {self._watchers}
               SET next_check_at = least(next_check_at, now()), updated_at = now()
             WHERE id = $1 AND user_id = $2 AND status = 'ACTIVE'
               AND (last_checked_at IS NULL OR last_checked_at <= now() - make_interval(secs => $3))
         RETURNING {_WATCHER_COLUMNS}
            """,
            watcher_id,
            user_id,
            float(min_spacing_seconds),
        )
        return None if row is None else self._record(row)

    async def delete(self, user_id: str, watcher_id: uuid.UUID) -> bool:
        status = await self._conn.execute(
            f"DELETE FROM {self._watchers} WHERE id = $1 AND user_id = $2", watcher_id, user_id
        )
        return bool(status == "DELETE 1")

    # --- scheduler --------------------------------------------------------------------------------------

    async def claim_due(self, owner: str, *, limit: int, lease_seconds: float) -> list[ClaimedWatcher]:
        """One statement: the leases and the claimed rows (no read per check)."""
        claimed = await self._leases.claim(
            self._conn,
            owner,
            lease_seconds=lease_seconds,
            limit=limit,
            due_condition="status = 'ACTIVE' AND next_check_at <= now()",
            order_by="next_check_at, id",
            returning=_WATCHER_COLUMN_NAMES,
        )
        return [
            ClaimedWatcher(row.row_id, row.lease, self._record(row.row, tolerate_unreadable=True))
            for row in claimed
        ]

    async def write_result(self, watcher_id: uuid.UUID, lease: Lease, after: WatcherAfterCheck) -> None:
        assignments: dict[str, object] = {
            "status": after.status.value,
            "consecutive_failures": after.consecutive_failures,
            "last_checked_at": after.checked_at,
            "next_check_at": after.next_check_at,
            "last_value_hash": after.last_value_hash,
            "last_value_excerpt": after.last_value_excerpt,
        }
        if after.changed:
            assignments["last_changed_at"] = after.checked_at
        await self._leases.fenced_update(self._conn, watcher_id, lease, assignments)


class PostgresCheckStore:
    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        self._conn = conn
        self._checks = f"{schema.quoted}.checks"

    async def insert(self, check: CheckRow) -> None:
        await self._conn.execute(
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

    async def list_for_watcher(
        self, watcher_id: uuid.UUID, *, limit: int, offset: int = 0, before: Position | None = None
    ) -> list[CheckRow]:
        keyset = "AND (checked_at, id) < ($4, $5)" if before else ""
        rows = await self._conn.fetch(
            f"""SELECT {_CHECK_COLUMNS} FROM {self._checks} WHERE watcher_id = $1 {keyset}
                ORDER BY checked_at DESC, id DESC LIMIT $2 OFFSET $3""",
            watcher_id,
            limit,
            offset,
            *(before or ()),
        )
        return [CheckRow(**dict(r)) for r in rows]

    async def triggers_in_last_hour(self, watcher_id: uuid.UUID) -> int:
        count: int = await self._conn.fetchval(
            f"""SELECT count(*) FROM {self._checks}
                 WHERE watcher_id = $1 AND trigger_id IS NOT NULL
                   AND checked_at > now() - interval '1 hour'""",
            watcher_id,
        )
        return count

    async def delete_expired(self, *, retention_days: int, batch: int) -> int:
        status = await self._conn.execute(
            f"""DELETE FROM {self._checks} WHERE id IN (
                    SELECT id FROM {self._checks} WHERE checked_at < now() - make_interval(days => $1)
                     ORDER BY checked_at LIMIT $2)""",
            retention_days,
            batch,
        )
        return int(status.split()[-1])
