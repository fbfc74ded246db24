"""The outbox relay: publishes committed outbox rows to Kafka, at least once, in order per key.

One round:

1. **Claim** (short transaction): the oldest due unpublished rows, `FOR UPDATE SKIP LOCKED`, leased to this
   relay with a random token and a DB-clock expiry. A row is only eligible when no *earlier* unpublished row
   of the same (topic, key) sits outside this batch -- held by another relay, backing off after a failure, or
   locked by a concurrent claim. So at most one relay works on a key, and never past a gap in it.
2. **Publish** in waves: wave *n* sends the *n*-th row of every key in the batch with the idempotent
   producer (`acks=all`) and awaits all acknowledgements. A key whose row failed sends nothing more this
   round; its remaining rows are released untouched, so they follow the failed row on a later round.
3. **Acknowledge** (short transaction): rows acknowledged by Kafka are marked published, but only while this
   relay's lease is current (owner + token + unexpired by the DB clock). Failed rows get exponential backoff
   (persisted `next_attempt_at`) and a stable error code.

A relay that crashes between 2 and 3 leaves rows leased; the lease expires and the rows are published again
(duplicates, never losses). Consumers deduplicate by event id.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from prometheus_client import CollectorRegistry

from yovision_platform.db import Identifier
from yovision_platform.metrics import labeled_counter, labeled_gauge, labeled_histogram
from yovision_platform.naming import KafkaNames

__all__ = ["OutboxRelay", "RelayConfig", "RelayMetrics", "RelayRound"]

log = logging.getLogger(__name__)

RELAY_BATCH_MAX_ROWS = 1000
RELAY_LEASE_SECONDS = 30.0
RELAY_LEASE_SAFETY_SECONDS = 5.0
RELAY_POLL_INTERVAL_SECONDS = 0.2
RELAY_ROW_BACKOFF_BASE_SECONDS = 1.0
RELAY_ROW_BACKOFF_CAP_SECONDS = 300.0
RELAY_LOOP_BACKOFF_CAP_SECONDS = 30.0
RELAY_HOUSEKEEPING_INTERVAL_SECONDS = 15.0
OUTBOX_PUBLISHED_RETENTION_SECONDS = 7 * 24 * 3600
OUTBOX_PRUNE_BATCH_ROWS = 5000


class PublishError(enum.StrEnum):
    BROKER_UNAVAILABLE = "broker_unavailable"
    TIMEOUT = "timeout"
    REJECTED = "message_rejected"
    UNKNOWN = "unknown_error"


def classify(error: BaseException) -> PublishError:
    if isinstance(error, KafkaTimeoutError | asyncio.TimeoutError | TimeoutError):
        return PublishError.TIMEOUT
    if isinstance(error, KafkaConnectionError):
        return PublishError.BROKER_UNAVAILABLE
    if isinstance(error, KafkaError):
        return PublishError.BROKER_UNAVAILABLE if error.retriable else PublishError.REJECTED
    return PublishError.UNKNOWN


@dataclass(frozen=True)
class RelayConfig:
    batch_size: int = 1000
    lease_seconds: float = RELAY_LEASE_SECONDS
    poll_interval_seconds: float = RELAY_POLL_INTERVAL_SECONDS
    row_backoff_base_seconds: float = RELAY_ROW_BACKOFF_BASE_SECONDS
    row_backoff_cap_seconds: float = RELAY_ROW_BACKOFF_CAP_SECONDS
    published_retention_seconds: float = OUTBOX_PUBLISHED_RETENTION_SECONDS

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= RELAY_BATCH_MAX_ROWS:
            raise ValueError(f"relay batch_size must be within 1..{RELAY_BATCH_MAX_ROWS}")
        if self.lease_seconds <= RELAY_LEASE_SAFETY_SECONDS:
            raise ValueError(f"relay lease_seconds must exceed {RELAY_LEASE_SAFETY_SECONDS}")


class RelayMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.published = labeled_counter(
            registry, "outbox_relay_published", "Outbox rows acknowledged by Kafka", {}
        )
        self.failed = labeled_counter(
            registry, "outbox_relay_failed", "Outbox rows that failed to publish", {"reason": PublishError}
        )
        self.failed.initialize_all()
        self.lease_lost = labeled_counter(
            registry, "outbox_relay_lease_lost", "Rows acknowledged by Kafka after their lease expired", {}
        )
        self.round_seconds = labeled_histogram(
            registry, "outbox_relay_round_seconds", "Duration of one claim-publish-acknowledge round", {}
        )
        self.backlog = labeled_gauge(
            registry, "outbox_relay_backlog", "Unpublished outbox rows at the last check", {}
        )


@dataclass(frozen=True)
class RelayRound:
    claimed: int
    published: int
    failed: int
    lease_lost: int


ProducerFactory = Callable[[], Awaitable[AIOKafkaProducer]]


class OutboxRelay:
    """Publishes one schema's outbox. Several relays (processes) may run against the same schema."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        schema: Identifier,
        producer_factory: ProducerFactory,
        *,
        owner: str,
        config: RelayConfig | None = None,
        metrics: RelayMetrics | None = None,
        names: KafkaNames | None = None,
    ) -> None:
        self._pool = pool
        self._names = names or KafkaNames()
        self._producer_factory = producer_factory
        self._producer: AIOKafkaProducer | None = None
        self._owner = owner
        self._config = config or RelayConfig()
        self._metrics = metrics
        table = f"{schema.quoted}.outbox"
        self._claim_sql = f"""
            WITH candidates AS (
                SELECT id, topic, message_key FROM {table}
                 WHERE published_at IS NULL AND next_attempt_at <= now()
                   AND (lease_expires_at IS NULL OR lease_expires_at <= now())
                 ORDER BY id
                 LIMIT $3
                 FOR UPDATE SKIP LOCKED
            ), eligible AS (
                -- A LATERAL probe with LIMIT 1 per candidate keeps the cost proportional to the batch;
                -- NOT EXISTS lets the planner hash-join every unpublished row (cost grows with backlog).
                SELECT c.id FROM candidates c
                  LEFT JOIN LATERAL (
                    SELECT 1 AS blocked FROM {table} earlier
                     WHERE earlier.published_at IS NULL
                       AND earlier.topic = c.topic AND earlier.message_key = c.message_key
                       AND earlier.id < c.id
                       AND earlier.id NOT IN (SELECT id FROM candidates)
                     LIMIT 1) b ON true
                 WHERE b.blocked IS NULL
            )
            UPDATE {table} AS o
               SET lease_owner = $1, lease_token = $4,
                   lease_expires_at = now() + make_interval(secs => $2)
              FROM eligible
             WHERE o.id = eligible.id
         RETURNING o.id, o.topic, o.message_key, o.value, o.headers, o.lease_token,
                   extract(epoch FROM o.lease_expires_at - now())::float8 AS lease_remaining
        """
        self._ack_sql = f"""
            UPDATE {table}
               SET published_at = now(), last_error_code = NULL,
                   lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
             WHERE id = ANY($1::bigint[]) AND lease_owner = $2 AND lease_token = ANY($3::uuid[])
               AND lease_expires_at > now()
        """
        self._fail_sql = f"""
            UPDATE {table}
               SET attempts = attempts + 1,
                   next_attempt_at = now() + make_interval(
                       secs => least($5::float8, $4::float8 * power(2, attempts)) * (0.8 + random() * 0.4)),
                   last_error_code = $6,
                   lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
             WHERE id = ANY($1::bigint[]) AND lease_owner = $2 AND lease_token = ANY($3::uuid[])
               AND lease_expires_at > now()
        """
        self._release_sql = f"""
            UPDATE {table} SET lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
             WHERE id = ANY($1::bigint[]) AND lease_owner = $2 AND lease_token = ANY($3::uuid[])
        """
        self._backlog_sql = f"SELECT count(*) FROM {table} WHERE published_at IS NULL"
        # Only published rows ever go; an unpublished row stays until Kafka has it, however old.
        self._prune_sql = f"""
            DELETE FROM {table} WHERE id IN (
                SELECT id FROM {table}
                 WHERE published_at IS NOT NULL AND published_at < now() - make_interval(secs => $1)
                 ORDER BY published_at LIMIT $2)
        """

    async def _ensure_producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            self._producer = await self._producer_factory()
        return self._producer

    async def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(Exception):
                await producer.stop()

    async def close(self) -> None:
        await self._drop_producer()

    async def _claim(self) -> list[asyncpg.Record]:
        token = uuid.uuid4()  # one fencing token per round, from the OS CSPRNG
        async with self._pool.acquire() as conn, conn.transaction():
            # Bitmap scans over the partial index make the claim sort the whole backlog; an index scan in
            # id order stops after the batch.
            await conn.execute("SET LOCAL enable_bitmapscan = off")
            rows: list[asyncpg.Record] = await conn.fetch(
                self._claim_sql, self._owner, self._config.lease_seconds, self._config.batch_size, token
            )
        rows.sort(key=lambda r: r["id"])
        return rows

    async def run_once(self) -> RelayRound:
        """One claim-publish-acknowledge round. Raises only for database errors."""
        started = time.monotonic()
        rows = await self._claim()
        if not rows:
            return RelayRound(0, 0, 0, 0)
        deadline = started + min(r["lease_remaining"] for r in rows) - RELAY_LEASE_SAFETY_SECONDS
        acked, failed, not_sent, error = await self._publish_in_waves(rows, deadline)
        lease_lost = await self._settle(acked, failed, not_sent, error)
        if error is not None:
            await self._drop_producer()
        if self._metrics is not None:
            self._metrics.published.labels().inc(len(acked) - lease_lost)
            if failed and error is not None:
                self._metrics.failed.labels(reason=error).inc(len(failed))
            self._metrics.lease_lost.labels().inc(lease_lost)
            self._metrics.round_seconds.labels().observe(time.monotonic() - started)
        return RelayRound(len(rows), len(acked) - lease_lost, len(failed), lease_lost)

    async def _publish_in_waves(
        self, rows: Sequence[asyncpg.Record], deadline: float
    ) -> tuple[list[asyncpg.Record], list[asyncpg.Record], list[asyncpg.Record], PublishError | None]:
        by_key: dict[tuple[str, bytes], list[asyncpg.Record]] = {}
        for row in rows:
            by_key.setdefault((row["topic"], row["message_key"]), []).append(row)
        acked: list[asyncpg.Record] = []
        failed: list[asyncpg.Record] = []
        error: PublishError | None = None
        wave = 0
        pending_keys = list(by_key)
        while pending_keys:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            batch = [by_key[key][wave] for key in pending_keys]
            outcomes = await self._send_wave(batch, remaining)
            next_keys = []
            for key, row, outcome in zip(pending_keys, batch, outcomes, strict=True):
                if outcome is None:
                    acked.append(row)
                    if len(by_key[key]) > wave + 1:
                        next_keys.append(key)
                else:
                    failed.append(row)
                    error = error or outcome
            pending_keys = next_keys
            wave += 1
        done = {r["id"] for r in acked} | {r["id"] for r in failed}
        not_sent = [r for r in rows if r["id"] not in done]
        return acked, failed, not_sent, error

    async def _send_wave(
        self, rows: Sequence[asyncpg.Record], within_seconds: float
    ) -> list[PublishError | None]:
        try:
            producer = await asyncio.wait_for(self._ensure_producer(), within_seconds)
        except Exception as exc:
            return [classify(exc)] * len(rows)

        async def send_all() -> list[Any]:
            futures = []
            for row in rows:
                headers = [(name, value.encode()) for name, value in _headers(row)]
                futures.append(
                    await producer.send(
                        self._names.topic(row["topic"]), row["value"], key=row["message_key"], headers=headers
                    )
                )
            return await asyncio.gather(*futures, return_exceptions=True)

        try:
            results = await asyncio.wait_for(send_all(), within_seconds)
        except Exception as exc:
            return [classify(exc)] * len(rows)
        return [classify(r) if isinstance(r, BaseException) else None for r in results]

    async def _settle(
        self,
        acked: Sequence[asyncpg.Record],
        failed: Sequence[asyncpg.Record],
        not_sent: Sequence[asyncpg.Record],
        error: PublishError | None,
    ) -> int:
        def ids_tokens(rows: Sequence[asyncpg.Record]) -> tuple[list[int], list[Any]]:
            return [r["id"] for r in rows], list({r["lease_token"] for r in rows})

        lease_lost = 0
        async with self._pool.acquire() as conn, conn.transaction():
            if acked:
                ids, tokens = ids_tokens(acked)
                status = await conn.execute(self._ack_sql, ids, self._owner, tokens)
                lease_lost = len(acked) - int(status.split()[-1])
            if failed:
                ids, tokens = ids_tokens(failed)
                await conn.execute(
                    self._fail_sql,
                    ids,
                    self._owner,
                    tokens,
                    self._config.row_backoff_base_seconds,
                    self._config.row_backoff_cap_seconds,
                    (error or PublishError.UNKNOWN).value,
                )
            if not_sent:
                ids, tokens = ids_tokens(not_sent)
                await conn.execute(self._release_sql, ids, self._owner, tokens)
        if lease_lost:
            log.warning("outbox rows published after their lease expired", extra={"rows": lease_lost})
        return lease_lost

    async def refresh_backlog(self) -> int:
        async with self._pool.acquire() as conn:
            backlog: int = await conn.fetchval(self._backlog_sql)
        if self._metrics is not None:
            self._metrics.backlog.labels().set(backlog)
        return backlog

    async def prune_published(self, *, batch_rows: int = OUTBOX_PRUNE_BATCH_ROWS) -> int:
        """Delete at most `batch_rows` rows published longer ago than the retention; returns the count."""
        async with self._pool.acquire() as conn:
            status: str = await conn.execute(
                self._prune_sql, self._config.published_retention_seconds, batch_rows
            )
        return int(status.split()[-1])

    async def _housekeeping(self) -> None:
        try:
            await self.refresh_backlog()
            await self.prune_published()
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("outbox housekeeping failed", extra={"error_code": type(exc).__name__})

    async def run(self, stop: asyncio.Event) -> None:
        """Relay until `stop` is set; broker or database trouble backs off exponentially, never exits."""
        failures = 0
        next_housekeeping = 0.0
        while not stop.is_set():
            if time.monotonic() >= next_housekeeping:
                await self._housekeeping()
                next_housekeeping = time.monotonic() + RELAY_HOUSEKEEPING_INTERVAL_SECONDS
            try:
                result = await self.run_once()
                failures = failures + 1 if result.failed else 0
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("outbox relay round failed", extra={"error_code": type(exc).__name__})
                failures += 1
                result = RelayRound(0, 0, 0, 0)
            if failures:
                delay = min(RELAY_LOOP_BACKOFF_CAP_SECONDS, self._config.poll_interval_seconds * 2**failures)
            elif result.claimed >= self._config.batch_size:
                continue
            else:
                delay = self._config.poll_interval_seconds
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
        await self.close()


def _headers(row: asyncpg.Record) -> list[tuple[str, str]]:
    raw = row["headers"]
    pairs = json.loads(raw) if isinstance(raw, str) else raw
    return [(str(k), str(v)) for k, v in pairs]
