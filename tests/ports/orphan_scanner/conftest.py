"""The two adapters every orphan-scanner store contract runs against: PostgreSQL (a migrated `orphan` schema
per test) and the in-memory fakes of `orphan_scanner.adapters.memory`.

A contract test works through the ports only; what a port does not read back (apply runs, the outbox) and
what a test does to the world behind a port (age a report, expire the scan lease) goes through the
adapter's `Backdoor`: an admin connection on PostgreSQL, the fake's own state in memory.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

import asyncpg
import pytest

from orphan_scanner.adapters.memory import MemoryOrphanUnitOfWork
from orphan_scanner.adapters.unit_of_work import PostgresOrphanUnitOfWork
from orphan_scanner.service_layer.ports import OrphanUnitOfWork
from tests.support import orphan_scanner_fixtures as orphan_integration
from tests.support.orphan_world import run_row
from tests.support.stack import MigratedSchema
from yovision_platform.messaging import OutboxMessage
from yovision_platform.storage import Identifier

UnitOfWorkFactory = Callable[[], OrphanUnitOfWork]

# The fixtures `orphan_schema` (a migrated orphan schema per test) and `orphan_pool` (its runtime pool), as
# the integration tests use them.
orphan_schema = orphan_integration.orphan_schema
orphan_pool = orphan_integration.orphan_pool

RUN_FIELDS = (
    "scan_id",
    "actor",
    "instance_id",
    "report_candidates",
    "status",
    "reason_code",
    "current_total",
    "current_candidates",
    "blocked_media_server_id",
)


def message(event_type: str = "ScanReported") -> OutboxMessage:
    return OutboxMessage(
        event_id=uuid.uuid4(), event_type=event_type, topic="orphan.scan.v1", key=b"scan", value=b"v"
    )


class Backdoor(Protocol):
    async def age_report(self, scan_id: uuid.UUID, by: timedelta) -> None: ...

    async def expire_lease(self) -> None: ...

    async def runs(self) -> list[dict[str, Any]]:
        """Every apply run: RUN_FIELDS plus `counts` (per outcome)."""
        ...

    async def committed_events(self) -> list[str]: ...


class PostgresBackdoor:
    def __init__(self, admin: asyncpg.Connection, schema: Identifier) -> None:
        self._admin = admin
        self._s = schema.quoted

    async def age_report(self, scan_id: uuid.UUID, by: timedelta) -> None:
        await self._admin.execute(
            f"UPDATE {self._s}.scan_reports SET created_at = created_at - $2::interval, "
            "expires_at = expires_at - $2::interval WHERE id = $1",
            scan_id,
            by,
        )

    async def expire_lease(self) -> None:
        await self._admin.execute(
            f"UPDATE {self._s}.scan_leases SET lease_expires_at = now() - interval '1 second' "
            "WHERE lease_token IS NOT NULL"
        )

    async def runs(self) -> list[dict[str, Any]]:
        rows = await self._admin.fetch(f"SELECT * FROM {self._s}.apply_runs ORDER BY started_at, id")
        return [
            {
                **{name: row[name] for name in RUN_FIELDS},
                "counts": {
                    "deleted": row["deleted_count"],
                    "already_absent": row["absent_count"],
                    "skipped_not_stale": row["skipped_count"],
                    "failed": row["failed_count"],
                },
            }
            for row in rows
        ]

    async def committed_events(self) -> list[str]:
        rows = await self._admin.fetch(f"SELECT event_type FROM {self._s}.outbox ORDER BY id")
        return [r["event_type"] for r in rows]


class MemoryBackdoor:
    def __init__(self, uow: MemoryOrphanUnitOfWork) -> None:
        self._uow = uow

    async def age_report(self, scan_id: uuid.UUID, by: timedelta) -> None:
        self._uow.reports.age(scan_id, by)

    async def expire_lease(self) -> None:
        self._uow.scan_lease.expire()

    async def runs(self) -> list[dict[str, Any]]:
        return [run_row(stored) for stored in self._uow.reports.runs.values()]

    async def committed_events(self) -> list[str]:
        return self._uow.outbox.event_types()


class OnPostgres:
    """Mixin: the contract on PostgreSQL."""

    @pytest.fixture
    def uow(self, orphan_pool: asyncpg.Pool, orphan_schema: MigratedSchema) -> UnitOfWorkFactory:
        return functools.partial(PostgresOrphanUnitOfWork, orphan_pool, orphan_schema.name)

    @pytest.fixture
    def backdoor(self, admin_conn: asyncpg.Connection, orphan_schema: MigratedSchema) -> Backdoor:
        return PostgresBackdoor(admin_conn, orphan_schema.name)


class Memory:
    """Mixin: the contract on the in-memory fakes."""

    @pytest.fixture
    def memory_uow(self) -> MemoryOrphanUnitOfWork:
        return MemoryOrphanUnitOfWork()

    @pytest.fixture
    def uow(self, memory_uow: MemoryOrphanUnitOfWork) -> UnitOfWorkFactory:
        return lambda: memory_uow

    @pytest.fixture
    def backdoor(self, memory_uow: MemoryOrphanUnitOfWork) -> Backdoor:
        return MemoryBackdoor(memory_uow)
