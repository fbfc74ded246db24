"""Bell's unit of work on PostgreSQL: the stores of one transaction (`BellUnitOfWork`).

- `PostgresBellUnitOfWork`: a pooled connection and its own transaction (the signed batch endpoint, the
  read APIs, the receipt purge).
- `PostgresBellUnitOfWork.joining(conn, schema)`: inside the transaction the IdempotentConsumer holds open
  for one message (its processed-event row and partition position commit with what the ingest writes, or
  roll back with it); a savepoint of its own would only repeat the consumer's, at two more round trips.
"""

from __future__ import annotations

from bell_receiver.adapters.audit_trail import PostgresAuditTrail
from bell_receiver.adapters.inbox import PostgresInbox
from bell_receiver.adapters.receipts import PostgresReceiptStore
from yovision_platform.storage import DbConnection, PostgresUnitOfWork


class PostgresBellUnitOfWork(PostgresUnitOfWork):
    audit_trail: PostgresAuditTrail
    inbox: PostgresInbox
    receipts: PostgresReceiptStore

    def bind(self, conn: DbConnection) -> None:
        self.audit_trail = PostgresAuditTrail(conn, self._schema)
        self.inbox = PostgresInbox(conn, self._schema)
        self.receipts = PostgresReceiptStore(conn, self._schema)
