"""media-worker's unit of work on PostgreSQL: one transaction with the media stores bound to it."""

from __future__ import annotations

import asyncpg

from media_worker.adapters.listing import PostgresListing
from media_worker.adapters.repository import (
    MediaTables,
    PostgresInstances,
    PostgresJobs,
    PostgresMaterials,
    PostgresSessions,
)
from yovision_platform.storage import DbConnection, Identifier, PostgresUnitOfWork

__all__ = ["PostgresMediaUnitOfWork"]


class PostgresMediaUnitOfWork(PostgresUnitOfWork):
    """One transaction of the media schema; `PostgresMediaUnitOfWork(pool, schema)` is the factory."""

    materials: PostgresMaterials
    sessions: PostgresSessions
    jobs: PostgresJobs
    instances: PostgresInstances
    listing: PostgresListing

    def __init__(self, pool: asyncpg.Pool, schema: Identifier) -> None:
        super().__init__(pool, schema)
        self._tables = MediaTables(schema)

    def bind(self, conn: DbConnection) -> None:
        self.materials = PostgresMaterials(conn, self._tables)
        self.sessions = PostgresSessions(conn, self._tables)
        self.jobs = PostgresJobs(conn, self._tables)
        self.instances = PostgresInstances(conn, self._tables)
        self.listing = PostgresListing(conn, self._tables.schema)
