"""The unit of work every use case writes through: its stores and the outbox, in one transaction.

A use case takes a *factory* of units of work (a port) and never a pool:

    async with uow_factory() as uow:          # one transaction
        device = await uow.devices.get(device_id)
        await uow.devices.save(device.disabled())
        await uow.outbox.enqueue(message)     # committed together with the save, or not at all

Leaving the block normally commits; an exception rolls back everything the block wrote, outbox
messages included, and propagates. A service's port is a `typing.Protocol` that extends `UnitOfWork`
with its stores; it has two adapters, proven equal by one contract suite run against both:

- `PostgresUnitOfWork` subclasses: one pooled connection, one transaction, repositories bound to it
  (`bind`), and the outbox as `TransactionalOutbox`; `joining(conn, schema)` works inside a transaction
  the caller owns (an `IdempotentConsumer` handler's: the consumer commits the effect with its position).
- `MemoryUnitOfWork` subclasses: fakes for fast use-case tests. Their stores keep plain Python state;
  the unit of work snapshots it on entry and restores it on rollback, and the outbox is an `MemoryOutbox`
  whose messages become visible only on commit, like rows of a committed transaction.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Protocol, Self

import asyncpg

from yovision_platform.errors import OutboxError
from yovision_platform.messaging._outbox import MAX_MESSAGE_BYTES, Outbox, OutboxMessage, outbox_shard
from yovision_platform.storage._db import STORE_ERRORS, DbConnection, Identifier

__all__ = [
    "MemoryOutbox",
    "MemoryUnitOfWork",
    "OutboxWriter",
    "PostgresUnitOfWork",
    "TransactionalOutbox",
    "UnitOfWork",
]

log = logging.getLogger("yovision_platform.unit_of_work")


class OutboxWriter(Protocol):
    """Where a use case puts the events that announce its state change."""

    async def enqueue(self, message: OutboxMessage) -> None: ...

    async def enqueue_many(self, messages: Sequence[OutboxMessage]) -> None:
        """Several events of one state change, in one round trip, in order."""
        ...


class UnitOfWork(Protocol):
    """One transaction: commit on a normal exit, roll back on an exception."""

    @property
    def outbox(self) -> OutboxWriter: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class TransactionalOutbox:
    """The outbox of one open transaction (the PostgreSQL adapter of `OutboxWriter`). `wake_after_commit`:
    the owner of the commit wakes the relays with `wake` once committed (see `yovision_platform.messaging`:
    a NOTIFY inside the transaction serialises its commit with every other one that notifies); otherwise
    the NOTIFY goes with the transaction."""

    def __init__(self, conn: DbConnection, outbox: Outbox, *, wake_after_commit: bool = False) -> None:
        self._conn = conn
        self._outbox = outbox
        self._wake_after_commit = wake_after_commit
        self._shards: set[int] = set()

    async def enqueue(self, message: OutboxMessage) -> None:
        await self.enqueue_many([message])

    async def enqueue_many(self, messages: Sequence[OutboxMessage]) -> None:
        await self._outbox.enqueue_many(self._conn, messages, notify=not self._wake_after_commit)
        if self._wake_after_commit:
            self._shards.update(outbox_shard(m.key) for m in messages)

    async def wake(self) -> None:
        """After the commit: wake the publishers of the shards written. A failure is only logged: the
        publishers' poll finds the rows."""
        if not self._shards:
            return
        try:
            await self._outbox.notify_shards(self._conn, self._shards)
        except STORE_ERRORS as exc:
            log.warning("outbox wake-up not sent", extra={"error_code": type(exc).__name__})


class MemoryOutbox:
    """The fake `OutboxWriter`: the same refusals as `Outbox.enqueue`; `committed` holds what committed,
    `writes` counts the calls (each one statement, one round trip, for the PostgreSQL adapter)."""

    def __init__(self) -> None:
        self.committed: list[OutboxMessage] = []
        self.writes = 0
        self._pending: list[OutboxMessage] = []

    async def enqueue(self, message: OutboxMessage) -> None:
        await self.enqueue_many([message])

    async def enqueue_many(self, messages: Sequence[OutboxMessage]) -> None:
        if any(message.size_bytes > MAX_MESSAGE_BYTES for message in messages):
            raise OutboxError("message_too_large", f"message exceeds {MAX_MESSAGE_BYTES} bytes")
        self.writes += 1
        self._pending.extend(messages)

    def commit(self) -> None:
        self.committed.extend(self._pending)
        self._pending.clear()

    def rollback(self) -> None:
        self._pending.clear()

    def event_types(self) -> list[str]:
        return [m.event_type for m in self.committed]


class PostgresUnitOfWork:
    """One pooled connection and one transaction. Subclasses bind their repositories in `bind`."""

    outbox: TransactionalOutbox

    def __init__(self, pool: asyncpg.Pool | None, schema: Identifier) -> None:
        self._pool = pool
        self._schema = schema
        self._conn: Any = None
        self._transaction: Any = None
        self._joined = False

    @classmethod
    def joining(cls, conn: DbConnection, schema: Identifier) -> Self:
        """A unit of work inside a transaction someone else owns (a consumer's per-message transaction):
        entering binds the stores to `conn`, leaving neither commits nor rolls back; the owner does."""
        uow = cls(None, schema)
        uow._conn = conn
        uow._joined = True
        return uow

    @property
    def connection(self) -> DbConnection:
        """The open transaction's connection (for repositories bound in `bind`)."""
        if self._conn is None:
            raise RuntimeError("the unit of work is not open")
        conn: DbConnection = self._conn
        return conn

    def bind(self, conn: DbConnection) -> None:
        """Create the repositories on `conn`; called once the transaction is open."""

    async def __aenter__(self) -> Self:
        if self._joined:
            if not self._conn.is_in_transaction():
                raise OutboxError(
                    "outbox_outside_transaction", "a joined unit of work needs an open transaction"
                )
            self.outbox = TransactionalOutbox(self._conn, Outbox(self._schema))
            self.bind(self._conn)
            return self
        assert self._pool is not None
        self._conn = await self._pool.acquire()
        try:
            self._transaction = self._conn.transaction()
            await self._transaction.start()
            self.outbox = TransactionalOutbox(self._conn, Outbox(self._schema), wake_after_commit=True)
            self.bind(self._conn)
        except BaseException:
            await self._release()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._joined:
            return
        try:
            if exc_type is None:
                await self._transaction.commit()
                await self.outbox.wake()
            else:
                await self._transaction.rollback()
        finally:
            await self._release()

    async def _release(self) -> None:
        conn, self._conn, self._transaction = self._conn, None, None
        if conn is not None and self._pool is not None:
            await self._pool.release(conn)


class MemoryUnitOfWork:
    """The fake unit of work. Subclasses name their fake stores in `stores()`; every attribute of those is
    snapshotted on entry and restored on rollback, so a failed use case leaves no trace, as in PostgreSQL.

    Fakes are single-process and serial: they model one transaction at a time, not concurrent isolation."""

    def __init__(self) -> None:
        self.outbox = MemoryOutbox()
        self.commits = 0
        self._saved: list[dict[str, Any]] = []

    def stores(self) -> Sequence[object]:
        return ()

    async def __aenter__(self) -> Self:
        self._saved = [copy.deepcopy(vars(store)) for store in self.stores()]
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.outbox.commit()
            self.commits += 1
            return
        for store, saved in zip(self.stores(), self._saved, strict=True):
            vars(store).clear()
            vars(store).update(saved)
        self.outbox.rollback()
