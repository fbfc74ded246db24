"""SQL for devices, sites, reconcile due rows and device-audit facts (schema given at runtime): the
PostgreSQL adapters of the `DeviceStore` and `SiteStore` ports, bound to one open transaction.

The source URI is stored encrypted (`source_uri_ciphertext`; the service layer encrypts and decrypts it) and
read here only by `stored_source`, for the comparison of a config change. The reconcile worker reads it with
its work item (adapters.reconcile_store); every other query leaves it out, so API views cannot carry it by
accident.

Row locks are `FOR NO KEY UPDATE`: they serialize the API's changes of a site or device as `FOR UPDATE`
would, but leave the `FOR KEY SHARE` of a foreign key check free. The reconciler locks a due row, then
inserts rows that reference the device (placements, ownership); with `FOR UPDATE` here an API change that
locked the device and then waited for the due row closed a deadlock cycle (found by schemathesis: 500s).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from sense_reconciler.domain import limits
from sense_reconciler.domain.errors import PathNameTaken
from sense_reconciler.domain.records import (
    AuditFact,
    DeviceRow,
    DeviceUpdate,
    NewDevice,
    ReconcileState,
    SiteRow,
    StoredSource,
)
from yovision_platform.observability import current_traceparent
from yovision_platform.storage import DbConnection, Identifier

__all__ = ["PostgresDeviceStore", "PostgresSiteStore"]

DEVICE_COLUMNS = (
    "id, tenant_id, site_id, name, path_name, media_server_id, desired_state, config_version, created_at, "
    "updated_at"
)
SITE_COLUMNS = "tenant_id, site_id, max_video_channels, media_server_id"
RECONCILE_STATE_COLUMNS = (
    "device_id, desired_generation, observed_generation, status, attempts, "
    "nullif(next_attempt_at, 'infinity') AS next_attempt_at, last_error_code, last_error_reason, "
    "last_result_at, partition, media_server_id"
)


def _device(record: asyncpg.Record | None) -> DeviceRow:
    assert record is not None
    return DeviceRow(**{name: record[name] for name in DeviceRow.__dataclass_fields__})


def _reconcile_state(record: asyncpg.Record) -> ReconcileState:
    return ReconcileState(**{name: record[name] for name in ReconcileState.__dataclass_fields__})


class PostgresSiteStore:
    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        self._conn = conn
        self._s = schema.quoted

    async def lock(self, tenant_id: str, site_id: str, *, new_site_server: str) -> SiteRow:
        """Create the site (default limit, server `new_site_server`) when missing, lock it, return it.

        Holding the site row lock serializes enabled-device counts and moves of one site."""
        await self._conn.execute(
            f"INSERT INTO {self._s}.sites ({SITE_COLUMNS}) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            tenant_id,
            site_id,
            limits.SITE_MAX_VIDEO_CHANNELS_DEFAULT,
            new_site_server,
        )
        row = await self._conn.fetchrow(
            f"SELECT {SITE_COLUMNS} FROM {self._s}.sites WHERE tenant_id = $1 AND site_id = $2 "
            "FOR NO KEY UPDATE",
            tenant_id,
            site_id,
        )
        assert row is not None
        return SiteRow(**dict(row))

    async def get(self, tenant_id: str, site_id: str) -> SiteRow | None:
        row = await self._conn.fetchrow(
            f"SELECT {SITE_COLUMNS} FROM {self._s}.sites WHERE tenant_id = $1 AND site_id = $2",
            tenant_id,
            site_id,
        )
        return None if row is None else SiteRow(**dict(row))

    async def set_server(self, tenant_id: str, site_id: str, media_server_id: str) -> None:
        await self._conn.execute(
            f"UPDATE {self._s}.sites SET media_server_id = $3, updated_at = now() "
            "WHERE tenant_id = $1 AND site_id = $2",
            tenant_id,
            site_id,
            media_server_id,
        )

    async def set_limit(self, tenant_id: str, site_id: str, max_video_channels: int) -> None:
        await self._conn.execute(
            f"UPDATE {self._s}.sites SET max_video_channels = $3, updated_at = now() "
            "WHERE tenant_id = $1 AND site_id = $2",
            tenant_id,
            site_id,
            max_video_channels,
        )


class PostgresDeviceStore:
    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        self._conn = conn
        self._s = schema.quoted

    async def add(self, device: NewDevice) -> DeviceRow:
        try:
            async with self._conn.transaction():  # a savepoint: the refusal leaves the transaction usable
                record = await self._conn.fetchrow(
                    f"INSERT INTO {self._s}.devices (id, tenant_id, site_id, name, path_name, "
                    "source_uri_ciphertext, desired_state, media_server_id) "
                    f"VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {DEVICE_COLUMNS}",
                    device.id,
                    device.tenant_id,
                    device.site_id,
                    device.name,
                    device.path_name,
                    device.source_uri_ciphertext,
                    device.desired_state,
                    device.media_server_id,
                )
        except asyncpg.UniqueViolationError:
            raise PathNameTaken() from None
        return _device(record)

    async def get(self, device_id: uuid.UUID, *, for_update: bool = False) -> DeviceRow | None:
        lock = " FOR NO KEY UPDATE" if for_update else ""
        record = await self._conn.fetchrow(
            f"SELECT {DEVICE_COLUMNS} FROM {self._s}.devices WHERE id = $1{lock}", device_id
        )
        return _device(record) if record is not None else None

    async def of_site(self, tenant_id: str, site_id: str) -> list[DeviceRow]:
        records = await self._conn.fetch(
            f"SELECT {DEVICE_COLUMNS} FROM {self._s}.devices WHERE tenant_id = $1 AND site_id = $2 "
            "ORDER BY id FOR NO KEY UPDATE",
            tenant_id,
            site_id,
        )
        return [_device(r) for r in records]

    async def list_page(
        self, *, tenant_id: str | None, site_id: str | None, after: uuid.UUID | None, limit: int
    ) -> list[DeviceRow]:
        records = await self._conn.fetch(
            f"SELECT {DEVICE_COLUMNS} FROM {self._s}.devices "
            "WHERE ($1::text IS NULL OR tenant_id = $1) AND ($2::uuid IS NULL OR id > $2) "
            "AND ($4::text IS NULL OR site_id = $4) ORDER BY id LIMIT $3",
            tenant_id,
            after,
            limit,
            site_id,
        )
        return [_device(r) for r in records]

    async def count_enabled(self, tenant_id: str, site_id: str) -> int:
        count: int = await self._conn.fetchval(
            f"SELECT count(*) FROM {self._s}.devices "
            "WHERE tenant_id = $1 AND site_id = $2 AND desired_state = 'enabled'",
            tenant_id,
            site_id,
        )
        return count

    async def update(self, device_id: uuid.UUID, change: DeviceUpdate) -> DeviceRow:
        record = await self._conn.fetchrow(
            f"UPDATE {self._s}.devices SET name = $2, "
            "source_uri = CASE WHEN $3::bytea IS NULL THEN source_uri END, "
            "source_uri_ciphertext = coalesce($3, source_uri_ciphertext), "
            "desired_state = $4, media_server_id = coalesce($5, media_server_id), "
            "config_version = config_version + 1, updated_at = now() "
            f"WHERE id = $1 RETURNING {DEVICE_COLUMNS}",
            device_id,
            change.name,
            change.source_uri_ciphertext,
            change.desired_state,
            change.media_server_id,
        )
        return _device(record)

    async def stored_source(self, device_id: uuid.UUID) -> StoredSource:
        row = await self._conn.fetchrow(
            f"SELECT source_uri_ciphertext, source_uri FROM {self._s}.devices WHERE id = $1", device_id
        )
        assert row is not None
        ciphertext = row["source_uri_ciphertext"]
        return StoredSource(None if ciphertext is None else bytes(ciphertext), row["source_uri"])

    async def insert_due_row(self, device_id: uuid.UUID, partition: int, media_server_id: str) -> None:
        await self._conn.execute(
            f"INSERT INTO {self._s}.reconcile_state (device_id, partition, media_server_id, trace_parent) "
            "VALUES ($1, $2, $3, $4)",
            device_id,
            partition,
            media_server_id,
            current_traceparent(),
        )

    async def mark_due(
        self, device_id: uuid.UUID, media_server_id: str, *, replace_due: bool = False
    ) -> None:
        """A running lease keeps going (fenced); its completion cannot record the new generation. The
        reconcile it causes continues the current trace."""
        await self._conn.execute(
            f"UPDATE {self._s}.reconcile_state SET desired_generation = desired_generation + 1, "
            "status = 'pending', attempts = 0, next_attempt_at = now(), media_server_id = $2, "
            "replace_due = replace_due OR $3, trace_parent = $4 "
            "WHERE device_id = $1",
            device_id,
            media_server_id,
            replace_due,
            current_traceparent(),
        )

    async def reconcile_state(self, device_id: uuid.UUID) -> ReconcileState | None:
        record = await self._conn.fetchrow(
            f"SELECT {RECONCILE_STATE_COLUMNS} FROM {self._s}.reconcile_state WHERE device_id = $1",
            device_id,
        )
        return None if record is None else _reconcile_state(record)

    async def reconcile_states(self, device_ids: Sequence[uuid.UUID]) -> list[ReconcileState]:
        records = await self._conn.fetch(
            f"SELECT {RECONCILE_STATE_COLUMNS} FROM {self._s}.reconcile_state "
            "WHERE device_id = ANY($1::uuid[]) ORDER BY device_id",
            list(device_ids),
        )
        return [_reconcile_state(r) for r in records]

    async def insert_fact(self, fact: AuditFact) -> datetime:
        """The database clock at whole milliseconds is the fact's `occurred_at`."""
        device = fact.device
        occurred_at: datetime = await self._conn.fetchval(
            f"INSERT INTO {self._s}.device_operation_outbox (event_id, fact_version, action, actor, "
            "device_id, tenant_id, site_id, changed_fields, config_version, occurred_at, trace_parent) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, date_trunc('milliseconds', now()), $10) "
            "RETURNING occurred_at",
            fact.event_id,
            fact.fact_version,
            fact.action,
            fact.actor,
            device.id,
            device.tenant_id,
            device.site_id,
            list(fact.changed_fields),
            device.config_version,
            current_traceparent(),
        )
        return occurred_at
