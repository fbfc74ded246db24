"""The PostgreSQL unit of work of signal-watcher: one transaction over the watchers, the check log and the
outbox (`SignalUnitOfWork`)."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from signal_watcher.adapters.crypto import SecretCipher
from signal_watcher.adapters.repository import PostgresCheckStore, PostgresWatcherStore
from yovision_platform.storage import DbConnection, Identifier, PostgresUnitOfWork

__all__ = ["PostgresSignalUnitOfWork", "PostgresUnitsOfWork"]


class PostgresSignalUnitOfWork(PostgresUnitOfWork):
    watchers: PostgresWatcherStore
    checks: PostgresCheckStore

    def __init__(self, pool: asyncpg.Pool, schema: Identifier, cipher: SecretCipher) -> None:
        super().__init__(pool, schema)
        self._cipher = cipher

    def bind(self, conn: DbConnection) -> None:
        self.watchers = PostgresWatcherStore(conn, self._schema, self._cipher)
        self.checks = PostgresCheckStore(conn, self._schema)

    async def now(self) -> datetime:
        moment: datetime = await self.connection.fetchval("SELECT now()")
        return moment


class PostgresUnitsOfWork:
    """The `UnitOfWorkFactory` of the service: a fresh unit of work on the pool per call."""

    def __init__(self, pool: asyncpg.Pool, schema: Identifier, cipher: SecretCipher) -> None:
        self.pool = pool
        self.schema = schema
        self.cipher = cipher

    def __call__(self) -> PostgresSignalUnitOfWork:
        return PostgresSignalUnitOfWork(self.pool, self.schema, self.cipher)
