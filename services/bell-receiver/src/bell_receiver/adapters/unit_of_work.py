"""Bell's unit of work on PostgreSQL: the stores of one transaction (`BellUnitOfWork`).

- `PostgresBellUnitOfWork`: a pooled connection and its own transaction (the signed batch endpoint, the
  read APIs, the receipt purge).
- `ConsumerBellUnitOfWork`: the transaction the IdempotentConsumer holds open for one message (its
  processed-event row and partition position commit with what the ingest writes, or roll back with it).
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

from bell_receiver.adapters.audit_trail import PostgresAuditTrail
from bell_receiver.adapters.inbox import PostgresInbox
from bell_receiver.adapters.receipts import PostgresReceiptStore
from yovision_platform.db import DbConnection, Identifier
from yovision_platform.outbox import Outbox
from yovision_platform.unit_of_work import OutboxWriter, PostgresUnitOfWork, TransactionalOutbox


class PostgresBellUnitOfWork(PostgresUnitOfWork):
    audit_trail: PostgresAuditTrail
    inbox: PostgresInbox
    receipts: PostgresReceiptStore

    def bind(self, conn: DbConnection) -> None:
        self.audit_trail = PostgresAuditTrail(conn, self._schema)
        self.inbox = PostgresInbox(conn, self._schema)
        self.receipts = PostgresReceiptStore(conn, self._schema)


class ConsumerBellUnitOfWork:
    """The stores on `conn`, inside the IdempotentConsumer's per-message savepoint: the consumer commits
    them with its processed-event row and partition position, and rolls them back with those when the
    handler raises (`EventRejected`: the savepoint; anything else: the whole batch). A savepoint of its own
    would only repeat the consumer's, at two more round trips per message."""

    outbox: OutboxWriter
    audit_trail: PostgresAuditTrail
    inbox: PostgresInbox
    receipts: PostgresReceiptStore

    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        if not conn.is_in_transaction():
            raise RuntimeError("ConsumerBellUnitOfWork joins an open transaction")
        self.outbox = TransactionalOutbox(conn, Outbox(schema))
        self.audit_trail = PostgresAuditTrail(conn, schema)
        self.inbox = PostgresInbox(conn, schema)
        self.receipts = PostgresReceiptStore(conn, schema)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None
