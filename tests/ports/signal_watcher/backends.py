"""The two adapters every signal-watcher store suite runs against, as fixture mixins: PostgreSQL (a migrated
schema per test, the runtime role) and the in-memory fake. Each gives the same fixtures:

- `units`: the `UnitOfWorkFactory` under test;
- `units_reading_with(cipher)`: the same rows through another key ring (another process's);
- `stored_secrets(watcher_id)`: the sealed headers and body exactly as stored;
- `tamper(watcher_id)`: damage one byte of the stored headers;
- `copy_secrets(source, target)`: put one watcher's stored secrets into another's row;
- `elapse(seconds)`: let the store's clock pass `seconds`;
- `committed_events()`: the event types of the committed outbox, oldest first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta

import asyncpg
import pytest

from signal_watcher.adapters.crypto import SecretCipher
from signal_watcher.adapters.memory import MemorySignalDatabase
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.service_layer.ports import UnitOfWorkFactory
from tests.support.stack import MigratedSchema

__all__ = ["Elapse", "MemoryBackend", "PostgresBackend", "StoreContract"]

Elapse = Callable[[float], Awaitable[None]]
ReadingWith = Callable[[SecretCipher], UnitOfWorkFactory]
StoredSecrets = Callable[[uuid.UUID], Awaitable[bytes]]
Tamper = Callable[[uuid.UUID], Awaitable[None]]
CopySecrets = Callable[[uuid.UUID, uuid.UUID], Awaitable[None]]
CommittedEvents = Callable[[], Awaitable[list[str]]]
CLOCK_WAIT_LIMIT_SECONDS = 10.0


class StoreContract:
    """Base of the store suites: each test takes `units` (and the other fixtures) from a backend mixin."""

    @pytest.fixture
    def units(self) -> UnitOfWorkFactory:
        raise NotImplementedError


class PostgresBackend:
    @pytest.fixture
    def units(self, pool: asyncpg.Pool, signal_db: MigratedSchema, cipher: SecretCipher) -> UnitOfWorkFactory:
        return PostgresUnitsOfWork(pool, signal_db.name, cipher)

    @pytest.fixture
    def units_reading_with(self, pool: asyncpg.Pool, signal_db: MigratedSchema) -> ReadingWith:
        return lambda cipher: PostgresUnitsOfWork(pool, signal_db.name, cipher)

    @pytest.fixture
    def stored_secrets(self, pool: asyncpg.Pool, signal_db: MigratedSchema) -> StoredSecrets:
        async def read(watcher_id: uuid.UUID) -> bytes:
            row = await pool.fetchrow(
                f"SELECT headers_ciphertext, body_ciphertext FROM {signal_db.name.quoted}.watchers "
                "WHERE id = $1",
                watcher_id,
            )
            assert row is not None
            return bytes(row["headers_ciphertext"]) + bytes(row["body_ciphertext"] or b"")

        return read

    @pytest.fixture
    def tamper(self, pool: asyncpg.Pool, signal_db: MigratedSchema) -> Tamper:
        async def damage(watcher_id: uuid.UUID) -> None:
            await pool.execute(
                # Flips the byte's bits, as the fake does: a fixed byte left 1 ciphertext in 256 intact.
                f"UPDATE {signal_db.name.quoted}.watchers "
                "SET headers_ciphertext = set_byte(headers_ciphertext, length(headers_ciphertext) - 4, "
                "get_byte(headers_ciphertext, length(headers_ciphertext) - 4) # 255) WHERE id = $1",
                watcher_id,
            )

        return damage

    @pytest.fixture
    def copy_secrets(self, pool: asyncpg.Pool, signal_db: MigratedSchema) -> CopySecrets:
        async def copy(source: uuid.UUID, target: uuid.UUID) -> None:
            table = f"{signal_db.name.quoted}.watchers"
            await pool.execute(
                f"UPDATE {table} AS t SET headers_ciphertext = s.headers_ciphertext, "
                f"body_ciphertext = s.body_ciphertext FROM {table} AS s WHERE s.id = $1 AND t.id = $2",
                source,
                target,
            )

        return copy

    @pytest.fixture
    def elapse(self, pool: asyncpg.Pool) -> Elapse:
        async def wait(seconds: float) -> None:
            """Until the database clock has passed `seconds` from now (bounded)."""
            target = await pool.fetchval("SELECT now() + make_interval(secs => $1)", float(seconds))
            deadline = time.monotonic() + CLOCK_WAIT_LIMIT_SECONDS
            while not await pool.fetchval("SELECT clock_timestamp() > $1", target):
                assert time.monotonic() < deadline, "the database clock did not move"
                await asyncio.sleep(min(seconds, 0.01))

        return wait

    @pytest.fixture
    def committed_events(self, pool: asyncpg.Pool, signal_db: MigratedSchema) -> CommittedEvents:
        query = f"SELECT event_type FROM {signal_db.name.quoted}.outbox ORDER BY id"

        async def read() -> list[str]:
            return [r["event_type"] for r in await pool.fetch(query)]

        return read


class MemoryBackend:
    @pytest.fixture
    def database(self, cipher: SecretCipher) -> MemorySignalDatabase:
        return MemorySignalDatabase(cipher)

    @pytest.fixture
    def units(self, database: MemorySignalDatabase) -> UnitOfWorkFactory:
        return database

    @pytest.fixture
    def units_reading_with(self, database: MemorySignalDatabase) -> ReadingWith:
        return database.reading_with

    @pytest.fixture
    def stored_secrets(self, database: MemorySignalDatabase) -> StoredSecrets:
        async def read(watcher_id: uuid.UUID) -> bytes:
            sealed = database.tables.watchers[watcher_id].secrets
            return sealed.headers + (sealed.body or b"")

        return read

    @pytest.fixture
    def tamper(self, database: MemorySignalDatabase) -> Tamper:
        async def damage(watcher_id: uuid.UUID) -> None:
            stored = database.tables.watchers[watcher_id]
            headers = bytearray(stored.secrets.headers)
            headers[-4] ^= 0xFF
            sealed = dataclasses.replace(stored.secrets, headers=bytes(headers))
            database.tables.watchers[watcher_id] = dataclasses.replace(stored, secrets=sealed)

        return damage

    @pytest.fixture
    def copy_secrets(self, database: MemorySignalDatabase) -> CopySecrets:
        async def copy(source: uuid.UUID, target: uuid.UUID) -> None:
            rows = database.tables.watchers
            rows[target] = dataclasses.replace(rows[target], secrets=rows[source].secrets)

        return copy

    @pytest.fixture
    def elapse(self, database: MemorySignalDatabase) -> Elapse:
        async def advance(seconds: float) -> None:
            database.clock.advance(seconds + timedelta(microseconds=1).total_seconds())

        return advance

    @pytest.fixture
    def committed_events(self, database: MemorySignalDatabase) -> CommittedEvents:
        async def read() -> list[str]:
            return [m.event_type for m in database.committed]

        return read
