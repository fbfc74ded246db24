"""Writing to the transactional outbox.

`Outbox.enqueue` inserts the message in the caller's transaction, so the message exists if and only if
the state change it announces committed. It refuses to run outside a transaction.

Per-key order equals commit order: before inserting, the writer takes a transaction-scoped advisory lock
on (topic, key). A second writer of the same key waits until the first commits, so ids of one key are
assigned in commit order and the relay, which publishes each key's rows in id order, never reorders them.
Writers of different keys never wait on each other. A transaction that enqueues several keys should do so
in a stable order (e.g. sorted): two transactions taking the same keys in opposite orders can deadlock, and
PostgreSQL then aborts one of them (`deadlock_detected`, safe to retry; nothing half-written survives).

Each row gets its shard, `partition_for_key(key, OUTBOX_SHARDS)`: all rows of a key share one shard, whose
publisher publishes them in id order (see `yovision_platform.messaging`). The transaction id column
(`xid`) is set by the database.

Waking the publisher: a NOTIFY of the shard on the outbox channel, so an idle publisher wakes at once
instead of at its next poll. By default the same statement queues it, delivered at commit. But PostgreSQL
serialises every committing transaction that notifies, across the whole database, behind one lock held until
its commit record is flushed (`PreCommit_Notify`): measured, writers of 10-event transactions stopped near
5,000 events/s on 2 cores, a third of their time waiting for that lock. So a writer that owns its commit
(`PostgresUnitOfWork`) passes ``notify=False`` and calls `notify_shards` once committed: a transaction of its
own with no write, so no flush under the lock. A wake-up lost to a crash in between costs the publisher's
poll interval, never a row.

`Outbox.enqueue_many` writes a transaction's several events in one statement, with the same guarantees
(it takes its keys' locks in sorted order, all before its first row): measured at 7.9 times the rows/s of
one `enqueue` per event and 1.26 times a raw `executemany` of the same rows (`python -m bench`, 500 rows per
transaction).

Trace context: each row also gets the W3C headers of the span current at `enqueue` (the API request or
consumed event that caused it), which the relay puts on the Kafka record (`yovision_platform.observability`).
They do not count towards `MAX_MESSAGE_BYTES`: they are bounded by `TRACE_HEADERS_MAX_BYTES`, which fits in
the margin between it and the broker's limit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from yovision_platform.errors import OutboxError
from yovision_platform.messaging._events import EventRecord
from yovision_platform.messaging._kafka import partition_for_key
from yovision_platform.observability._tracing import TRACEPARENT_HEADER, trace_headers, tracer
from yovision_platform.storage._db import DbConnection, Identifier

__all__ = ["MAX_MESSAGE_BYTES", "OUTBOX_SHARDS", "Outbox", "OutboxMessage", "notify_channel", "outbox_shard"]

# Kafka's default max.message.bytes is 1 MiB + 12; stay below it so a message can never be refused by size
# at publish time (that would be a per-message failure behind which later messages of the key would wait).
MAX_MESSAGE_BYTES = 1_000_000
# Fixed by platform migration 0003 (cursor rows 0..5, outbox_key_shard(key, 6)): changing it moves keys
# between shards, so it needs a migration that hands every cursor over first.
OUTBOX_SHARDS = 6
NOTIFY_CHANNEL_MAX_BYTES = 63
_tracer = tracer("yovision_platform.outbox")


def notify_channel(schema: Identifier, table: str = "outbox") -> str:
    """The LISTEN/NOTIFY channel on which writers of `schema.table` announce committed rows."""
    return f"{table}:{schema}"[:NOTIFY_CHANNEL_MAX_BYTES]


@dataclass(frozen=True)
class OutboxMessage:
    event_id: uuid.UUID
    event_type: str
    topic: str
    key: bytes
    value: bytes
    headers: Sequence[tuple[str, str]] = field(default=())

    @classmethod
    def from_event(cls, event: EventRecord, *, topic: str | None = None) -> OutboxMessage:
        """The outbox form of an encoded event; `topic` overrides the catalogue's (tests, replays)."""
        return cls(
            event_id=event.event_id,
            event_type=event.event_type,
            topic=topic or event.topic,
            key=event.key,
            value=event.value,
            headers=event.text_headers,
        )

    def traced(self, context_headers: Sequence[tuple[str, str]]) -> list[list[str]]:
        """The headers stored with the row: the message's, then the trace context's unless it has one."""
        pairs = [[k, v] for k, v in self.headers]
        if context_headers and not any(k == TRACEPARENT_HEADER for k, _ in self.headers):
            pairs.extend([k, v] for k, v in context_headers)
        return pairs

    @property
    def size_bytes(self) -> int:
        return len(self.key) + len(self.value) + sum(len(k) + len(v.encode()) for k, v in self.headers)


class Outbox:
    def __init__(self, schema: Identifier) -> None:
        self._channel = notify_channel(schema)
        self._insert = {notify: _insert_sql(schema, notify=notify) for notify in (True, False)}
        self._insert_many = {notify: _insert_many_sql(schema, notify=notify) for notify in (True, False)}

    async def enqueue_many(
        self, conn: DbConnection, messages: Sequence[OutboxMessage], *, notify: bool = True
    ) -> list[int]:
        """Insert `messages` inside the caller's open transaction in one round trip; their row ids, in
        order. The same guarantees as `enqueue`, message by message: the (topic, key) locks, all taken
        before any row is written and in sorted order (two such writers never deadlock on each other),
        the shard, one NOTIFY per shard (unless `notify` is False: then `notify_shards` after the commit).
        Nothing is written when one message is too large."""
        if not conn.is_in_transaction():
            raise OutboxError(
                "outbox_outside_transaction", "outbox rows must be written inside a transaction"
            )
        if any(message.size_bytes > MAX_MESSAGE_BYTES for message in messages):
            raise OutboxError("message_too_large", f"message exceeds {MAX_MESSAGE_BYTES} bytes")
        if not messages:
            return []
        context = trace_headers()
        with _tracer.start_as_current_span(
            "outbox enqueue", attributes={"messaging.batch.message_count": len(messages)}
        ):
            rows = await self._fetch_many(conn, messages, context, notify=notify)
        return sorted(row["id"] for row in rows)  # ids are drawn in message order (ORDER BY position)

    async def _fetch_many(
        self,
        conn: DbConnection,
        messages: Sequence[OutboxMessage],
        context: Sequence[tuple[str, str]],
        *,
        notify: bool,
    ) -> list[Any]:
        return await conn.fetch(
            self._insert_many[notify],
            [m.event_id for m in messages],
            [m.event_type for m in messages],
            [m.topic for m in messages],
            [m.key for m in messages],
            [m.value for m in messages],
            [json.dumps(m.traced(context)) for m in messages],
            [outbox_shard(m.key) for m in messages],
            *((self._channel,) if notify else ()),
        )

    async def enqueue(self, conn: DbConnection, message: OutboxMessage, *, notify: bool = True) -> int:
        """Insert `message` inside the caller's open transaction; returns the outbox row id. `notify`: as
        for `enqueue_many`."""
        if not conn.is_in_transaction():
            raise OutboxError(
                "outbox_outside_transaction", "outbox rows must be written inside a transaction"
            )
        if message.size_bytes > MAX_MESSAGE_BYTES:
            raise OutboxError("message_too_large", f"message exceeds {MAX_MESSAGE_BYTES} bytes")
        with _tracer.start_as_current_span("outbox enqueue", attributes={"messaging.batch.message_count": 1}):
            row_id: int = await conn.fetchval(
                self._insert[notify],
                message.event_id,
                message.event_type,
                message.topic,
                message.key,
                message.value,
                json.dumps(message.traced(trace_headers())),
                outbox_shard(message.key),
                *((self._channel,) if notify else ()),
            )
        return row_id

    async def notify_shards(self, conn: DbConnection, shards: Iterable[int]) -> None:
        """Wake the publishers of `shards`: after the commit of rows written with ``notify=False``."""
        await conn.execute(self._notify_sql, self._channel, sorted(set(shards)))

    _notify_sql = "SELECT count(pg_notify($1, shard::text)) FROM unnest($2::smallint[]) AS shard"


def outbox_shard(key: bytes) -> int:
    """The shard of the rows of `key`."""
    return partition_for_key(key, OUTBOX_SHARDS)


def _insert_sql(schema: Identifier, *, notify: bool) -> str:
    # The key lock (and the NOTIFY) in a subquery the insert's row is selected from: done before the row.
    wake = ", pg_notify($8, $7::smallint::text)" if notify else ""
    return f"""
        INSERT INTO {schema.quoted}.outbox
               (event_id, event_type, topic, message_key, value, headers, shard)
        SELECT $1, $2, $3, $4, $5, $6::jsonb, $7::smallint
          FROM (SELECT pg_advisory_xact_lock(hashtextextended($3 || ':' || encode($4, 'hex'), 0)){wake})
               AS key_lock
     RETURNING id
    """


def _insert_many_sql(schema: Identifier, *, notify: bool) -> str:
    # One statement: the key locks (sorted; volatile calls run after the sort), then one NOTIFY per shard,
    # both in MATERIALIZED CTEs that the insert's rows cross-join, so they are done before the first row is
    # written; the rows in message order.
    notices = (
        """, notices AS MATERIALIZED (
            SELECT count(pg_notify($8, shard::text)) AS sent
              FROM (SELECT DISTINCT unnest($7::smallint[]) AS shard) AS shards
        )"""
        if notify
        else ""
    )
    return f"""
        WITH locks AS MATERIALIZED (
            SELECT count(*) AS taken FROM (
                SELECT pg_advisory_xact_lock(hashtextextended(topic || ':' || encode(key, 'hex'), 0))
                  FROM (SELECT DISTINCT topic, key FROM unnest($3::text[], $4::bytea[]) AS k(topic, key))
                       AS keys
                 ORDER BY topic, key) AS taken_in_order
        ){notices}
        INSERT INTO {schema.quoted}.outbox
               (event_id, event_type, topic, message_key, value, headers, shard)
        SELECT m.event_id, m.event_type, m.topic, m.key, m.value, m.headers::jsonb, m.shard
          FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::bytea[], $6::text[],
                      $7::smallint[]) WITH ORDINALITY
               AS m(event_id, event_type, topic, key, value, headers, shard, position),
               locks{", notices" if notify else ""}
         ORDER BY m.position
     RETURNING id
    """
