"""The PostgreSQL unit of work of sense-reconciler: one pooled connection, one transaction, every store
bound to it, and the Kafka outbox of the same transaction."""

from __future__ import annotations

import asyncpg

from sense_reconciler.adapters.device_repository import PostgresDeviceStore, PostgresSiteStore
from sense_reconciler.adapters.reconcile_store import PostgresReconcileStore
from sense_reconciler.service_layer.ports import UnitOfWorkFactory
from yovision_platform.storage import DbConnection, Identifier, PostgresUnitOfWork

__all__ = ["PostgresSenseUnitOfWork", "postgres_units"]


class PostgresSenseUnitOfWork(PostgresUnitOfWork):
    devices: PostgresDeviceStore
    sites: PostgresSiteStore
    reconcile: PostgresReconcileStore

    def bind(self, conn: DbConnection) -> None:
        self.devices = PostgresDeviceStore(conn, self._schema)
        self.sites = PostgresSiteStore(conn, self._schema)
        self.reconcile = PostgresReconcileStore(conn, self._schema)


def postgres_units(pool: asyncpg.Pool, schema: Identifier) -> UnitOfWorkFactory:
    """A new unit of work on `pool` per call."""

    def unit() -> PostgresSenseUnitOfWork:
        return PostgresSenseUnitOfWork(pool, schema)

    return unit
