"""Outbox write throughput: `Outbox.enqueue` against a raw INSERT of the same rows in same-size transactions.

All variants write one connection's worth of transactions of `transaction_rows` rows each:

- ``outbox_enqueue``: `Outbox.enqueue` per row (advisory lock on (topic, key), size check, shard, NOTIFY,
  INSERT RETURNING).
- ``raw_insert``: the same INSERT ... RETURNING id per row (shard included), no lock, no NOTIFY, no checks.
- ``raw_executemany``: the same rows as one `executemany` per transaction (reference only: the ceiling a
  batched enqueue API could approach; the platform has none).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import asyncpg

from bench.stats import Latency, Stopwatch, per_second
from yovision_platform.messaging import OUTBOX_SHARDS, Outbox, OutboxMessage, partition_for_key
from yovision_platform.storage import DbConnection, Identifier

__all__ = ["EnqueueResult", "run_enqueue"]

ENQUEUE_TRANSACTION_ROWS = 500

Writer = Callable[[DbConnection, Sequence[OutboxMessage]], Awaitable[None]]


@dataclass(frozen=True)
class EnqueueResult:
    variant: str
    rows: int
    stored: int  # rows the outbox held after the run
    transaction_rows: int
    wall_seconds: float
    cpu_seconds: float
    transaction_latency: Latency

    @property
    def rows_per_second(self) -> float:
        return per_second(self.rows, self.wall_seconds)

    def as_dict(self) -> dict[str, object]:
        return {
            "rows": self.rows,
            "stored": self.stored,
            "transaction_rows": self.transaction_rows,
            "rows_per_s": round(self.rows_per_second),
            "wall_s": round(self.wall_seconds, 3),
            "cpu_s": round(self.cpu_seconds, 3),
            "transaction_latency": self.transaction_latency.as_dict(),
        }


def _insert_sql(schema: Identifier, *, returning: bool) -> str:
    return (
        f"INSERT INTO {schema.quoted}.outbox "
        "(event_id, event_type, topic, message_key, value, headers, shard)"
        " VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7)" + (" RETURNING id" if returning else "")
    )


def _params(message: OutboxMessage) -> tuple[object, ...]:
    headers = json.dumps([[k, v] for k, v in message.headers])
    shard = partition_for_key(message.key, OUTBOX_SHARDS)
    return (message.event_id, message.event_type, message.topic, message.key, message.value, headers, shard)


def outbox_writer(schema: Identifier) -> Writer:
    outbox = Outbox(schema)

    async def write(conn: DbConnection, chunk: Sequence[OutboxMessage]) -> None:
        for message in chunk:
            await outbox.enqueue(conn, message)

    return write


def outbox_many_writer(schema: Identifier) -> Writer:
    """`Outbox.enqueue_many`: a transaction's events in one round trip (locks, shards, NOTIFY kept)."""
    outbox = Outbox(schema)

    async def write(conn: DbConnection, chunk: Sequence[OutboxMessage]) -> None:
        await outbox.enqueue_many(conn, chunk)

    return write


def raw_insert_writer(schema: Identifier) -> Writer:
    sql = _insert_sql(schema, returning=True)

    async def write(conn: DbConnection, chunk: Sequence[OutboxMessage]) -> None:
        for message in chunk:
            await conn.fetchval(sql, *_params(message))

    return write


def raw_executemany_writer(schema: Identifier) -> Writer:
    sql = _insert_sql(schema, returning=False)

    async def write(conn: DbConnection, chunk: Sequence[OutboxMessage]) -> None:
        await conn.executemany(sql, [_params(m) for m in chunk])

    return write


async def run_enqueue(
    variant: str,
    pool: asyncpg.Pool,
    writer: Writer,
    messages: Sequence[OutboxMessage],
    *,
    schema: Identifier,
    transaction_rows: int = ENQUEUE_TRANSACTION_ROWS,
) -> EnqueueResult:
    """Write `messages` in order, `transaction_rows` per transaction, over one connection; then count the
    rows the outbox of `schema` holds (`stored`)."""
    transaction_seconds: list[float] = []
    async with pool.acquire() as conn:
        watch = Stopwatch().start()
        for offset in range(0, len(messages), transaction_rows):
            chunk = messages[offset : offset + transaction_rows]
            started = time.perf_counter()
            async with conn.transaction():
                await writer(conn, chunk)
            transaction_seconds.append(time.perf_counter() - started)
        watch.stop()
        stored = int(await conn.fetchval(f"SELECT count(*) FROM {schema.quoted}.outbox"))
    return EnqueueResult(
        variant=variant,
        rows=len(messages),
        stored=stored,
        transaction_rows=transaction_rows,
        wall_seconds=watch.wall_seconds,
        cpu_seconds=watch.cpu_seconds,
        transaction_latency=Latency.of_seconds(transaction_seconds),
    )
