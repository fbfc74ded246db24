"""SQL for devices, sites, reconcile due rows, audit facts and path ownership (schema given at runtime).

`source_uri` is written here but never selected: only compared (`source_uri_differs`). The reconcile worker
reads it with its work item (adapters.reconcile_store); every query here leaves it out, so API views cannot
carry it by accident.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from sense_reconciler.domain import limits
from yovision_platform.db import DbConnection, Identifier

DEVICE_COLUMNS = (
    "id, tenant_id, site_id, name, path_name, desired_state, config_version, created_at, updated_at"
)


@dataclass(frozen=True)
class DeviceRow:
    id: uuid.UUID
    tenant_id: str
    site_id: str
    name: str
    path_name: str
    desired_state: str
    config_version: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_record(cls, record: asyncpg.Record | None) -> DeviceRow:
        assert record is not None
        return cls(**{name: record[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class AuditFact:
    event_id: uuid.UUID
    action: str
    actor: str
    device: DeviceRow
    changed_fields: Sequence[str]
    fact_version: int = 2


class DeviceRepository:
    def __init__(self, schema: Identifier) -> None:
        self.schema = schema
        self._s = schema.quoted

    async def lock_site(self, conn: DbConnection, tenant_id: str, site_id: str) -> int:
        """Create the site with the default limit when missing, lock it, return its max_video_channels.

        Holding the site row lock serializes enabled-device counts of one site across transactions."""
        await conn.execute(
            f"INSERT INTO {self._s}.sites (tenant_id, site_id, max_video_channels) VALUES ($1, $2, $3) "
            "ON CONFLICT DO NOTHING",
            tenant_id,
            site_id,
            limits.SITE_MAX_VIDEO_CHANNELS_DEFAULT,
        )
        limit: int = await conn.fetchval(
            f"SELECT max_video_channels FROM {self._s}.sites "
            "WHERE tenant_id = $1 AND site_id = $2 FOR UPDATE",
            tenant_id,
            site_id,
        )
        return limit

    async def set_site_limit(self, conn: DbConnection, tenant_id: str, site_id: str, limit: int) -> None:
        await conn.execute(
            f"UPDATE {self._s}.sites SET max_video_channels = $3, updated_at = now() "
            "WHERE tenant_id = $1 AND site_id = $2",
            tenant_id,
            site_id,
            limit,
        )

    async def count_enabled(self, conn: DbConnection, tenant_id: str, site_id: str) -> int:
        count: int = await conn.fetchval(
            f"SELECT count(*) FROM {self._s}.devices "
            "WHERE tenant_id = $1 AND site_id = $2 AND desired_state = 'enabled'",
            tenant_id,
            site_id,
        )
        return count

    async def insert_device(
        self,
        conn: DbConnection,
        *,
        device_id: uuid.UUID,
        tenant_id: str,
        site_id: str,
        name: str,
        path_name: str,
        source_uri: str,
        desired_state: str,
    ) -> DeviceRow:
        record = await conn.fetchrow(
            f"INSERT INTO {self._s}.devices "
            "(id, tenant_id, site_id, name, path_name, source_uri, desired_state) "
            f"VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {DEVICE_COLUMNS}",
            device_id,
            tenant_id,
            site_id,
            name,
            path_name,
            source_uri,
            desired_state,
        )
        return DeviceRow.from_record(record)

    async def get(
        self, conn: DbConnection, device_id: uuid.UUID, *, for_update: bool = False
    ) -> DeviceRow | None:
        lock = " FOR UPDATE" if for_update else ""
        record = await conn.fetchrow(
            f"SELECT {DEVICE_COLUMNS} FROM {self._s}.devices WHERE id = $1{lock}", device_id
        )
        return DeviceRow.from_record(record) if record is not None else None

    async def list_page(
        self,
        conn: DbConnection,
        *,
        tenant_id: str | None,
        after: uuid.UUID | None,
        limit: int,
        site_id: str | None = None,
    ) -> list[DeviceRow]:
        records = await conn.fetch(
            f"SELECT {DEVICE_COLUMNS} FROM {self._s}.devices "
            "WHERE ($1::text IS NULL OR tenant_id = $1) AND ($2::uuid IS NULL OR id > $2) "
            "AND ($4::text IS NULL OR site_id = $4) ORDER BY id LIMIT $3",
            tenant_id,
            after,
            limit,
            site_id,
        )
        return [DeviceRow.from_record(r) for r in records]

    async def reconcile_statuses(
        self, conn: DbConnection, device_ids: list[uuid.UUID]
    ) -> list[asyncpg.Record]:
        records: list[asyncpg.Record] = await conn.fetch(
            "SELECT device_id, desired_generation, observed_generation, status, attempts, next_attempt_at, "
            f"last_error_code, last_result_at, partition FROM {self._s}.reconcile_state "
            "WHERE device_id = ANY($1::uuid[])",
            device_ids,
        )
        return records

    async def site(self, conn: DbConnection, tenant_id: str, site_id: str) -> tuple[int, int] | None:
        """(max_video_channels, enabled devices) of a known site; None for a site Sense never saw."""
        limit = await conn.fetchval(
            f"SELECT max_video_channels FROM {self._s}.sites WHERE tenant_id = $1 AND site_id = $2",
            tenant_id,
            site_id,
        )
        if limit is None:
            return None
        return int(limit), await self.count_enabled(conn, tenant_id, site_id)

    async def update_device(
        self,
        conn: DbConnection,
        device_id: uuid.UUID,
        *,
        name: str,
        source_uri: str | None,
        desired_state: str,
    ) -> DeviceRow:
        record = await conn.fetchrow(
            f"UPDATE {self._s}.devices SET name = $2, source_uri = coalesce($3, source_uri), "
            "desired_state = $4, config_version = config_version + 1, updated_at = now() "
            f"WHERE id = $1 RETURNING {DEVICE_COLUMNS}",
            device_id,
            name,
            source_uri,
            desired_state,
        )
        return DeviceRow.from_record(record)

    async def source_uri_differs(self, conn: DbConnection, device_id: uuid.UUID, source_uri: str) -> bool:
        differs: bool = await conn.fetchval(
            f"SELECT source_uri IS DISTINCT FROM $2 FROM {self._s}.devices WHERE id = $1",
            device_id,
            source_uri,
        )
        return differs

    async def insert_due_row(self, conn: DbConnection, device_id: uuid.UUID, partition: int) -> None:
        await conn.execute(
            f"INSERT INTO {self._s}.reconcile_state (device_id, partition) VALUES ($1, $2)",
            device_id,
            partition,
        )

    async def mark_due(self, conn: DbConnection, device_id: uuid.UUID) -> None:
        """A new desired generation: due now, attempts reset. A running lease keeps going (fenced)."""
        await conn.execute(
            f"UPDATE {self._s}.reconcile_state SET desired_generation = desired_generation + 1, "
            "status = 'pending', attempts = 0, next_attempt_at = now() WHERE device_id = $1",
            device_id,
        )

    async def reconcile_status(self, conn: DbConnection, device_id: uuid.UUID) -> asyncpg.Record | None:
        record: asyncpg.Record | None = await conn.fetchrow(
            "SELECT device_id, desired_generation, observed_generation, status, attempts, next_attempt_at, "
            f"last_error_code, last_result_at, partition FROM {self._s}.reconcile_state WHERE device_id = $1",
            device_id,
        )
        return record

    async def insert_fact(self, conn: DbConnection, fact: AuditFact) -> datetime:
        """Insert the fact; returns its ``occurred_at``: the database clock at whole milliseconds."""
        device = fact.device
        occurred_at: datetime = await conn.fetchval(
            f"INSERT INTO {self._s}.device_operation_outbox (event_id, fact_version, action, actor, "
            "device_id, tenant_id, site_id, changed_fields, config_version, occurred_at) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, date_trunc('milliseconds', now())) "
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
        )
        return occurred_at
