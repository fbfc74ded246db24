"""The two backends every contract suite of sense-reconciler runs on: PostgreSQL (a migrated schema of its
own per test) and the in-memory fake (`sense_reconciler.adapters.memory.MemorySense`).

A `Backend` offers the ports and, for what a port does not read back, helpers that look at the committed
state the same way on both: the committed Kafka outbox, the dead letters, a legacy cleartext row."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import asyncpg

from sense_reconciler.adapters.audit_push_store import PostgresAuditPushStore
from sense_reconciler.adapters.memory import MemorySense
from sense_reconciler.adapters.source_uri_secrets import SourceUriSecrets
from sense_reconciler.adapters.unit_of_work import postgres_units
from sense_reconciler.domain.records import NewDevice
from sense_reconciler.service_layer.ports import AuditPushStore, UnitOfWorkFactory
from yovision_platform.security import SecretRowStore
from yovision_platform.storage import Identifier

__all__ = ["SERVER", "Backend", "MemoryBackend", "PostgresBackend", "new_device", "register", "wait_for"]

SERVER = "default"


class Backend(Protocol):
    units: UnitOfWorkFactory

    def audit_push_store(self, owner: str, *, lease_seconds: float) -> AuditPushStore: ...

    def source_uri_secrets(self, *, legacy_only: bool = False) -> SecretRowStore: ...

    def connection(self) -> AbstractAsyncContextManager[Any]:
        """What a `SecretRowStore` call takes (a pooled connection; None for the fake)."""
        ...

    async def committed_event_types(self) -> list[str]: ...

    async def dead_letters(self) -> dict[uuid.UUID, str]: ...

    async def store_cleartext_source(self, device_id: uuid.UUID, source_uri: str) -> None: ...


class PostgresBackend:
    def __init__(self, pool: asyncpg.Pool, schema: Identifier) -> None:
        self.pool = pool
        self.schema = schema
        self.units = postgres_units(pool, schema)

    def audit_push_store(self, owner: str, *, lease_seconds: float) -> PostgresAuditPushStore:
        return PostgresAuditPushStore(self.pool, self.schema, owner, lease_seconds=lease_seconds)

    def source_uri_secrets(self, *, legacy_only: bool = False) -> SourceUriSecrets:
        return SourceUriSecrets(self.schema, legacy_only=legacy_only)

    def connection(self) -> AbstractAsyncContextManager[Any]:
        return self.pool.acquire()

    async def committed_event_types(self) -> list[str]:
        rows = await self.pool.fetch(f"SELECT event_type FROM {self.schema.quoted}.outbox ORDER BY id")
        return [r["event_type"] for r in rows]

    async def dead_letters(self) -> dict[uuid.UUID, str]:
        rows = await self.pool.fetch(
            f"SELECT event_id, error_code FROM {self.schema.quoted}.device_operation_dead_letters"
        )
        return {r["event_id"]: r["error_code"] for r in rows}

    async def store_cleartext_source(self, device_id: uuid.UUID, source_uri: str) -> None:
        await self.pool.execute(
            f"UPDATE {self.schema.quoted}.devices SET source_uri = $2, source_uri_ciphertext = NULL "
            "WHERE id = $1",
            device_id,
            source_uri,
        )


class MemoryBackend:
    def __init__(self, sense: MemorySense) -> None:
        self.sense = sense
        self.units = sense.units()

    def audit_push_store(self, owner: str, *, lease_seconds: float) -> AuditPushStore:
        return self.sense.audit_push_store(owner, lease_seconds=lease_seconds)

    def source_uri_secrets(self, *, legacy_only: bool = False) -> SecretRowStore:
        return self.sense.source_uri_secrets(legacy_only=legacy_only)

    def connection(self) -> AbstractAsyncContextManager[Any]:
        @asynccontextmanager
        async def nothing() -> AsyncIterator[None]:
            yield None

        return nothing()

    async def committed_event_types(self) -> list[str]:
        return self.sense.outbox.event_types()

    async def dead_letters(self) -> dict[uuid.UUID, str]:
        facts = {f.row_id: f.event_id for f in self.sense.state.facts}
        return {facts[row_id]: code for row_id, code in self.sense.state.dead_letters.items()}

    async def store_cleartext_source(self, device_id: uuid.UUID, source_uri: str) -> None:
        self.sense.store_cleartext_source(device_id, source_uri)


def new_device(
    *,
    tenant_id: str = "tenant-a",
    site_id: str = "site-1",
    path_name: str | None = None,
    desired_state: str = "enabled",
    media_server_id: str = SERVER,
    device_id: uuid.UUID | None = None,
    ciphertext: bytes = b"sealed",
) -> NewDevice:
    return NewDevice(
        id=device_id or uuid.uuid4(),
        tenant_id=tenant_id,
        site_id=site_id,
        name="cam",
        path_name=path_name or f"p-{uuid.uuid4().hex[:12]}",
        source_uri_ciphertext=ciphertext,
        desired_state=desired_state,
        media_server_id=media_server_id,
    )


async def register(
    backend: Backend,
    *,
    partition: int = 0,
    server: str = SERVER,
    desired_state: str = "enabled",
    site_id: str = "site-1",
    device_id: uuid.UUID | None = None,
) -> uuid.UUID:
    """A device on its site (created on `server`) with its due row, as the API writes them."""
    async with backend.units() as uow:
        await uow.sites.lock("tenant-a", site_id, new_site_server=server)
        device = await uow.devices.add(
            new_device(
                site_id=site_id, desired_state=desired_state, media_server_id=server, device_id=device_id
            )
        )
        await uow.devices.insert_due_row(device.id, partition, server)
    return device.id


async def wait_for(condition: Callable[[], Awaitable[bool]], *, timeout_seconds: float = 10.0) -> None:
    """Poll `condition` until it holds (bounded); used where a lease must run out by the store's clock."""
    deadline = time.monotonic() + timeout_seconds
    while not await condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)
