"""The idempotent consumer: apply each event's effect exactly once, keyed by (source_system, event_id).

For every Kafka message, in **one** database transaction (the messages a poll returned for one partition
share that transaction, each with its own savepoint):

- decode it (an undecodable message is dead-lettered with its stable code, never dropped silently);
- insert `(source_system, event_id, payload digest)` into `processed_events`;
  - new: run the handler, whose writes share the transaction;
  - known with the same digest: `duplicate`, nothing else happens;
  - known with another digest: `id_conflict`, dead-lettered, nothing else happens;
- advance the partition's position in `consumer_positions`.

Only after the commit is the Kafka offset committed. A crash in between replays the message, which then
finds its own `processed_events` row and changes nothing. On assignment the consumer seeks to the position
stored in the database, which is authoritative over Kafka's committed offset.

A handler raises `EventRejected(code)` for a message that can never be applied (it is dead-lettered and the
consumer moves on). Any other exception is treated as transient: the transaction rolls back (with the whole
batch), the consumer seeks back to the batch's first message and retries after a backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import hashlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import IllegalStateError
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry

from yovision_platform.backoff import backoff_seconds, wait_for_stop
from yovision_platform.errors import PlatformError
from yovision_platform.messaging._kafka import create_consumer, start_client
from yovision_platform.messaging._kafka_security import KafkaTarget
from yovision_platform.observability._metrics import labeled_gauge
from yovision_platform.observability._tracing import context_from_headers, trace_id_of, tracer
from yovision_platform.storage._db import DbConnection, Identifier

__all__ = [
    "ConsumeOutcome",
    "ConsumerMetrics",
    "EventRejected",
    "IdempotentConsumer",
    "InboundEvent",
    "PositionRestoringListener",
    "stored_positions",
]

log = logging.getLogger("yovision_platform.consumer")
_tracer = tracer("yovision_platform.consumer")

CONSUMER_RETRY_BACKOFF_BASE_SECONDS = 0.5
CONSUMER_RETRY_BACKOFF_CAP_SECONDS = 30.0
CONSUMER_POLL_TIMEOUT_MS = 500
CONSUMER_LAG_REFRESH_SECONDS = 1.0
CONSUMER_POSITION_WAIT_SECONDS = 0.05
CONSUMER_DEAD_LETTER_REFRESH_SECONDS = 15.0


class ConsumeOutcome(enum.StrEnum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"
    ID_CONFLICT = "id_conflict"
    UNDECODABLE = "undecodable"
    REJECTED = "rejected"


class ConsumerMetrics:
    """The consumer's health as an operator (and the alert rules in infra/prometheus/) sees it:

    - ``consumer_lag_messages``: on the partitions assigned to this process, messages between the consumer's
      position and the end of the partition (read_committed), refreshed about every second;
    - ``consumer_dead_letters``: rows of ``consumer_dead_letters`` for this consumer group (all time,
      from the database, so a restart does not hide them), refreshed about every 15 s and at each new one;
    - ``consumer_last_poll_timestamp_seconds``: Unix time at which the consumer loop last finished a round
      (poll Kafka, apply, store positions). A loop stuck on an await stops it while HTTP keeps serving; the
      lag gauge would then freeze at its last value, so this is what shows a stalled consumer.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.lag = labeled_gauge(
            registry, "consumer_lag_messages", "Messages on this process's partitions not yet applied", {}
        )
        self.dead_letters = labeled_gauge(
            registry, "consumer_dead_letters", "Dead-lettered messages of this consumer group (database)", {}
        )
        self.last_poll = labeled_gauge(
            registry,
            "consumer_last_poll_timestamp_seconds",
            "Unix time the consumer loop last finished a round (poll, apply, store positions)",
            {},
        )
        self.lag.labels().set(0)
        self.dead_letters.labels().set(0)
        self.last_poll.labels().set_to_current_time()


DEAD_LETTER_OUTCOMES = frozenset(
    {ConsumeOutcome.ID_CONFLICT, ConsumeOutcome.UNDECODABLE, ConsumeOutcome.REJECTED}
)


class EventRejected(PlatformError):
    """Raised by a handler for an event that can never be applied; carries a stable code."""

    def __init__(self, code: str) -> None:
        super().__init__(code, "event rejected by handler")


@dataclass(frozen=True)
class InboundEvent:
    source_system: str
    event_id: uuid.UUID
    event_type: str
    record: Mapping[str, Any]
    digest: bytes
    topic: str
    partition: int
    offset: int
    key: bytes | None
    # The trace the event's handling belongs to (continued from the record's headers), for a handler that
    # stores it with what it writes (Bell's audit rows); None when the record carries no valid context.
    trace_id: str | None = None


class DecodedLike(Protocol):
    @property
    def event_type(self) -> str: ...
    @property
    def record(self) -> Mapping[str, Any]: ...


Decoder = Callable[[bytes], DecodedLike]
Handler = Callable[[DbConnection, InboundEvent], Awaitable[None]]
PartitionsHook = Callable[[set[TopicPartition]], Awaitable[None]]


async def stored_positions(
    conn: DbConnection, schema: Identifier, consumer_group: str
) -> dict[TopicPartition, int]:
    """The next offset to apply per partition, as committed with the effects (how far a projection is)."""
    rows = await conn.fetch(
        f"SELECT topic, kafka_partition, next_offset FROM {schema.quoted}.consumer_positions "
        "WHERE consumer_group = $1",
        consumer_group,
    )
    return {TopicPartition(r["topic"], r["kafka_partition"]): r["next_offset"] for r in rows}


class IdempotentConsumer:
    def __init__(
        self,
        pool: asyncpg.Pool,
        schema: Identifier,
        *,
        consumer_group: str,
        decode: Decoder,
        handler: Handler,
        metrics: ConsumerMetrics | None = None,
    ) -> None:
        self._pool = pool
        self._metrics = metrics
        self._lag_refreshed_at = 0.0
        self._dead_letters_refreshed_at = 0.0
        self._group = consumer_group
        self._decode = decode
        self._handler = handler
        s = schema.quoted
        self._insert_processed = f"""
            INSERT INTO {s}.processed_events (source_system, event_id, event_type, payload_digest,
                                              consumer_group, topic, kafka_partition, kafka_offset)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
            ON CONFLICT (source_system, event_id) DO NOTHING
            RETURNING 1
        """
        self._known_digest = (
            f"SELECT payload_digest FROM {s}.processed_events WHERE source_system = $1 AND event_id = $2"
        )
        self._dead_letter = f"""
            INSERT INTO {s}.consumer_dead_letters (consumer_group, topic, kafka_partition, kafka_offset,
                error_code, source_system, event_id, payload_digest, message_key, value)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
            ON CONFLICT (consumer_group, topic, kafka_partition, kafka_offset) DO NOTHING
        """
        self._advance = f"""
            INSERT INTO {s}.consumer_positions (consumer_group, topic, kafka_partition, next_offset)
            VALUES ($1, $2, $3, $4)
            ON CONFLICT (consumer_group, topic, kafka_partition) DO UPDATE
               SET next_offset = greatest({s}.consumer_positions.next_offset, excluded.next_offset),
                   updated_at = now()
        """
        self._count_dead_letters = f"SELECT count(*) FROM {s}.consumer_dead_letters WHERE consumer_group = $1"
        self._schema = schema
        self._stored: dict[TopicPartition, int] = {}

    async def refresh_metrics(self, consumer: AIOKafkaConsumer, *, dead_letters_now: bool = False) -> None:
        """Update lag and dead-letter gauges when due (no-op without metrics)."""
        if self._metrics is None:
            return
        self._metrics.last_poll.labels().set_to_current_time()
        now = time.monotonic()
        if now - self._lag_refreshed_at >= CONSUMER_LAG_REFRESH_SECONDS:
            self._lag_refreshed_at = now
            self._metrics.lag.labels().set(await _lag(consumer))
        if dead_letters_now or now - self._dead_letters_refreshed_at >= CONSUMER_DEAD_LETTER_REFRESH_SECONDS:
            self._dead_letters_refreshed_at = now
            async with self._pool.acquire() as conn:
                count: int = await conn.fetchval(self._count_dead_letters, self._group)
            self._metrics.dead_letters.labels().set(count)

    @property
    def consumer_group(self) -> str:
        return self._group

    async def stored_positions(self) -> dict[TopicPartition, int]:
        async with self._pool.acquire() as conn:
            return await stored_positions(conn, self._schema, self._group)

    async def process(self, message: ConsumerRecord[bytes, bytes]) -> ConsumeOutcome:
        return (await self.process_batch([message]))[0]

    async def process_batch(
        self, messages: Sequence[ConsumerRecord[bytes, bytes]], *, next_offset: int | None = None
    ) -> list[ConsumeOutcome]:
        """Apply consecutive messages of ONE partition in one transaction, then advance its position past
        the last (or to `next_offset`, the consumer's position, when that is further: past a transaction
        marker). Any transient error rolls the whole batch back (the caller retries from its first message);
        each message's own rejection stays confined to its savepoint."""
        if not messages:
            return []
        last = messages[-1]
        if any(m.topic != last.topic or m.partition != last.partition for m in messages):
            raise ValueError("a batch holds messages of one partition only")
        outcomes = []
        async with self._pool.acquire() as conn, conn.transaction():
            for message in messages:
                value: bytes = message.value or b""
                outcomes.append(await self._apply(conn, message, value, hashlib.sha256(value).digest()))
            position = max(last.offset + 1, next_offset or 0)
            await conn.execute(self._advance, self._group, last.topic, last.partition, position)
        self._stored[TopicPartition(last.topic, last.partition)] = position
        return outcomes

    async def _store_skipped_offsets(
        self, consumer: AIOKafkaConsumer, handled: Mapping[TopicPartition, object]
    ) -> None:
        """Transaction markers (every relay batch ends with one) and aborted batches take offsets but yield
        no message: store positions past them, so a stored position reaches the partition's end offset."""
        for tp in consumer.assignment():
            if tp in handled or consumer.highwater(tp) is None:
                continue  # just handled, or nothing fetched yet
            position = await _known_position(consumer, tp)
            if position is not None and position > self._stored.get(tp, -1):
                async with self._pool.acquire() as conn:
                    await conn.execute(self._advance, self._group, tp.topic, tp.partition, position)
                self._stored[tp] = position

    async def _apply(
        self, conn: DbConnection, message: ConsumerRecord[bytes, bytes], value: bytes, digest: bytes
    ) -> ConsumeOutcome:
        """Apply one message inside a consumer span that continues the trace of its record's headers."""
        with _tracer.start_as_current_span(
            f"{message.topic} process",
            context=context_from_headers(message.headers),
            kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": "kafka",
                "messaging.destination.name": message.topic,
                "messaging.destination.partition.id": str(message.partition),
                "messaging.kafka.offset": message.offset,
                "messaging.consumer.group.name": self._group,
            },
        ) as span:
            outcome = await self._apply_traced(conn, message, value, digest)
            span.set_attribute("yovision.outcome", outcome.value)
            return outcome

    async def _apply_traced(
        self, conn: DbConnection, message: ConsumerRecord[bytes, bytes], value: bytes, digest: bytes
    ) -> ConsumeOutcome:
        try:
            decoded = self._decode(value)
            envelope = decoded.record["envelope"]
            event = InboundEvent(
                source_system=str(envelope["source_system"]),
                event_id=uuid.UUID(str(envelope["event_id"])),
                event_type=decoded.event_type,
                record=decoded.record,
                digest=digest,
                topic=message.topic,
                partition=message.partition,
                offset=message.offset,
                key=message.key,
                trace_id=trace_id_of(),
            )
        except Exception as exc:
            code = exc.code if isinstance(exc, PlatformError) else "undecodable"
            await self._record_dead_letter(conn, message, value, digest, code, None, None)
            return ConsumeOutcome.UNDECODABLE
        try:
            # A savepoint: a rejection undoes the processed row and the handler's partial writes together.
            async with conn.transaction():
                inserted = await conn.fetchval(
                    self._insert_processed,
                    event.source_system,
                    event.event_id,
                    event.event_type,
                    digest,
                    self._group,
                    message.topic,
                    message.partition,
                    message.offset,
                )
                if inserted is not None:
                    await self._handler(conn, event)
        except EventRejected as rejected:
            await self._record_dead_letter(
                conn, message, value, digest, rejected.code, event.source_system, event.event_id
            )
            return ConsumeOutcome.REJECTED
        if inserted is not None:
            return ConsumeOutcome.APPLIED
        known = await conn.fetchval(self._known_digest, event.source_system, event.event_id)
        if bytes(known) == digest:
            return ConsumeOutcome.DUPLICATE
        await self._record_dead_letter(
            conn,
            message,
            value,
            digest,
            ConsumeOutcome.ID_CONFLICT.value,
            event.source_system,
            event.event_id,
        )
        return ConsumeOutcome.ID_CONFLICT

    async def _record_dead_letter(
        self,
        conn: DbConnection,
        message: ConsumerRecord[bytes, bytes],
        value: bytes,
        digest: bytes,
        code: str,
        source_system: str | None,
        event_id: uuid.UUID | None,
    ) -> None:
        log.warning(
            "event dead-lettered",
            extra={"error_code": code, "topic": message.topic, "partition": message.partition},
        )
        await conn.execute(
            self._dead_letter,
            self._group,
            message.topic,
            message.partition,
            message.offset,
            code,
            source_system,
            event_id,
            digest,
            message.key,
            value,
        )

    async def consume_topics(
        self,
        kafka: KafkaTarget,
        topics: Sequence[str],
        stop: asyncio.Event,
        *,
        client_id: str,
        on_assigned: PartitionsHook | None = None,
        on_revoked: PartitionsHook | None = None,
    ) -> None:
        """The whole worker: a consumer of this group subscribed to `topics` (positions restored from the
        database on every assignment), consumed until `stop` is set, then closed."""
        consumer = create_consumer(kafka, group_id=self._group, client_id=client_id)
        listener = PositionRestoringListener(consumer, self, on_assigned=on_assigned, on_revoked=on_revoked)
        consumer.subscribe(list(topics), listener=listener)
        try:
            await start_client(consumer, kafka, close=consumer.stop)
            await self.run(consumer, stop)
        finally:
            await consumer.stop()

    async def run(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        """Consume until `stop` is set. The consumer must be started and subscribed (see the listener)."""
        failures = 0
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=CONSUMER_POLL_TIMEOUT_MS)
            failed = False
            for tp, messages in batches.items():
                if not messages:
                    continue
                try:
                    outcomes = await self.process_batch(messages, next_offset=await consumer.position(tp))
                except Exception as exc:
                    failed = True
                    failures += 1
                    log.warning(
                        "event processing failed; will retry",
                        extra={
                            "error_code": type(exc).__name__,
                            "topic": tp.topic,
                            "partition": tp.partition,
                        },
                    )
                    consumer.seek(tp, messages[0].offset)
                    delay = backoff_seconds(
                        failures,
                        base_seconds=CONSUMER_RETRY_BACKOFF_BASE_SECONDS,
                        cap_seconds=CONSUMER_RETRY_BACKOFF_CAP_SECONDS,
                    )
                    await wait_for_stop(stop, delay)
                else:
                    failures = 0
                    with contextlib.suppress(Exception):  # the DB position is authoritative
                        await consumer.commit({tp: messages[-1].offset + 1})
                    if any(outcome in DEAD_LETTER_OUTCOMES for outcome in outcomes):
                        self._dead_letters_refreshed_at = 0.0
                if stop.is_set():
                    break
            if not failed and not stop.is_set():
                with contextlib.suppress(Exception):  # best effort: retried on the next poll
                    await self._store_skipped_offsets(consumer, batches)
            with contextlib.suppress(Exception):  # metrics never stop consumption
                await self.refresh_metrics(consumer)


async def _lag(consumer: AIOKafkaConsumer) -> int:
    """Sum over assigned partitions of (last stable offset - position); partitions not fetched yet count 0."""
    total = 0
    for tp in consumer.assignment():
        end = consumer.last_stable_offset(tp)
        if end is None:
            end = consumer.highwater(tp)
        if end is None:
            continue
        position = await _known_position(consumer, tp)
        if position is None:
            continue
        total += max(0, end - position)
    return total


async def _known_position(consumer: AIOKafkaConsumer, tp: TopicPartition) -> int | None:
    """The partition's position, or None while it is being reset: position() would wait for it, and
    consumption must never stall on that."""
    try:
        position: int = await asyncio.wait_for(consumer.position(tp), CONSUMER_POSITION_WAIT_SECONDS)
    except (TimeoutError, IllegalStateError):
        return None
    return position


class PositionRestoringListener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Seeks newly assigned partitions to the database position; forwards changes to optional hooks.

    `on_revoked` runs before partitions are released, so an owner can stop work on them first.
    """

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        idempotent: IdempotentConsumer,
        *,
        on_assigned: PartitionsHook | None = None,
        on_revoked: PartitionsHook | None = None,
    ) -> None:
        self._consumer = consumer
        self._idempotent = idempotent
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if self._on_revoked is not None:
            await self._on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        positions = await self._idempotent.stored_positions()
        for tp in assigned:
            if tp in positions:
                self._consumer.seek(tp, positions[tp])
        if self._on_assigned is not None:
            await self._on_assigned(set(assigned))
