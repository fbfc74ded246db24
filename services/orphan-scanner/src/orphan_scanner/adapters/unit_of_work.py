"""orphan-scanner's unit of work on PostgreSQL: one pooled connection, one transaction, the stores and the
outbox bound to it (the adapter of `service_layer.ports.OrphanUnitOfWork`)."""

from __future__ import annotations

from orphan_scanner.adapters.projection_store import PostgresProjectionStore
from orphan_scanner.adapters.report_store import PostgresReportStore
from orphan_scanner.adapters.scan_lease import PostgresScanLease
from yovision_platform.storage import DbConnection, PostgresUnitOfWork


class PostgresOrphanUnitOfWork(PostgresUnitOfWork):
    reports: PostgresReportStore
    projection: PostgresProjectionStore
    scan_lease: PostgresScanLease

    def bind(self, conn: DbConnection) -> None:
        self.reports = PostgresReportStore(conn, self._schema)
        self.projection = PostgresProjectionStore(conn, self._schema)
        self.scan_lease = PostgresScanLease(conn, self._schema)
