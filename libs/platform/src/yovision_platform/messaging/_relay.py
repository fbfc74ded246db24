"""`OutboxRelay`, the outbox relay: publishes committed outbox rows to Kafka, at least once, in order
per key. (Operators know it as the `outbox-relay` worker and its `outbox_relay_*` metrics; those names
are kept as they are because dashboards, alerts and `<P>_OUTBOX_RELAY_ENABLED` use them.)

No outbox row is ever updated. The outbox is split in `OUTBOX_SHARDS` shards by key (the Kafka partition of
the key for a topic with that many partitions); each shard has one cursor row (`yovision_platform.
shard_cursors`) and is relayed by one relay at a time, which reads it window by window
(`yovision_platform.messaging`). Per owned shard, one batch is:

1. **Read** the next rows of the shard's window, in id order (at most `batch_size`).
2. **Publish** them in one Kafka transaction under the shard's ``transactional.id`` (idempotent,
   ``acks=all``). Any failure aborts the transaction -- none of the batch becomes visible to
   ``read_committed`` consumers -- and backs the shard off (1 s doubling to 30 s, persisted on the cursor
   row with a stable code, counted from the moment the failed attempt began); the batch is then read and
   sent again.
3. **Advance** the stored cursor past the published batches: one UPDATE fenced on (owner, epoch), in the
   background and at most every `advance_interval_seconds` while rows flow, at once when the shard goes
   idle or is handed over. Zero rows means another relay took the shard over: this relay stops the shard.

**Fencing** is Kafka's: a relay that takes a shard over runs ``init_transactions`` under the shard's
transactional id before it publishes, which aborts its predecessor's open transaction and makes every later
commit of the predecessor fail (`PublishError.FENCED`). So a relay paused past its lease publishes nothing
after its successor started, and the cursor write needs not be on a batch's path.

Pipelining: batch *n+1* is read while batch *n* is being committed. An idle shard waits for a ``NOTIFY``
from `Outbox.enqueue` (delivered at commit), with a poll as fallback.

A relay killed after a commit but before the cursor caught up leaves the stored cursor behind what it
published; the successor publishes those batches again, in order (duplicates, never losses or reordering:
every relay publishes a contiguous run of the shard's rows from a position at or before where the last one
stopped). Consumers deduplicate by event id.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry

from yovision_platform.errors import PlatformError
from yovision_platform.messaging._naming import KafkaNames
from yovision_platform.messaging._outbox import OUTBOX_SHARDS, notify_channel
from yovision_platform.messaging._outbox_windows import (
    OutboxWindows,
    WindowBatch,
    WindowPosition,
    WindowReader,
    unpassed_count_sql,
)
from yovision_platform.messaging._shard_cursors import CursorFenced, ShardCursors, ShardLease, assigned_shards
from yovision_platform.messaging._txn_producer import (
    PublisherFactory,
    PublishError,
    PublishFailed,
    TransactionalPublisher,
)
from yovision_platform.observability._metrics import labeled_counter, labeled_gauge, labeled_histogram
from yovision_platform.observability._tracing import record_span, sampled_parent, tracer, tracing_on
from yovision_platform.storage._db import Identifier

__all__ = [
    "OUTBOX_TABLE",
    "OutboxRelay",
    "OutboxRelayConfig",
    "OutboxRelayMetrics",
    "OutboxShardsMismatch",
    "executor_for",
    "transactional_id",
]

log = logging.getLogger("yovision_platform.outbox_relay")
_tracer = tracer("yovision_platform.outbox_relay")

OUTBOX_TABLE = "outbox"
RELAY_BATCH_MAX_ROWS = 10_000
RELAY_DEFAULT_BATCH_ROWS = 5_000
RELAY_LEASE_SECONDS = 30.0
RELAY_MIN_LEASE_SECONDS = 1.0
# An idle shard reads again after this even without a wake-up: with the LISTEN connection up, only a
# wake-up lost to a crash between a writer's commit and its NOTIFY waits for it. While that connection is
# down (and until it is back), the shards read as often as RELAY_DEAF_POLL_INTERVAL_SECONDS.
RELAY_POLL_INTERVAL_SECONDS = 5.0
RELAY_DEAF_POLL_INTERVAL_SECONDS = 0.5
# While rows flow, the stored cursor is written at most this often (see _ShardPublisher); a crash then
# publishes again at most this much of a shard's traffic, plus the batch in flight.
RELAY_ADVANCE_INTERVAL_SECONDS = 0.1
RELAY_BACKOFF_BASE_SECONDS = 1.0
RELAY_BACKOFF_CAP_SECONDS = 30.0
RELAY_BACKOFF_JITTER = 0.2
RELAY_HOUSEKEEPING_INTERVAL_SECONDS = 15.0
OUTBOX_PUBLISHED_RETENTION_SECONDS = 7 * 24 * 3600
OUTBOX_PRUNE_BATCH_ROWS = 5000
DB_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)


class OutboxShardsMismatch(PlatformError):
    code = "outbox_shards_mismatch"


@dataclass(frozen=True)
class OutboxRelayConfig:
    batch_size: int = RELAY_DEFAULT_BATCH_ROWS
    lease_seconds: float = RELAY_LEASE_SECONDS
    poll_interval_seconds: float = RELAY_POLL_INTERVAL_SECONDS
    deaf_poll_interval_seconds: float = RELAY_DEAF_POLL_INTERVAL_SECONDS
    advance_interval_seconds: float = RELAY_ADVANCE_INTERVAL_SECONDS
    backoff_base_seconds: float = RELAY_BACKOFF_BASE_SECONDS
    backoff_cap_seconds: float = RELAY_BACKOFF_CAP_SECONDS
    published_retention_seconds: float = OUTBOX_PUBLISHED_RETENTION_SECONDS
    housekeeping_interval_seconds: float = RELAY_HOUSEKEEPING_INTERVAL_SECONDS
    shards: int = OUTBOX_SHARDS

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= RELAY_BATCH_MAX_ROWS:
            raise ValueError(f"relay batch_size must be within 1..{RELAY_BATCH_MAX_ROWS}")
        if self.lease_seconds < RELAY_MIN_LEASE_SECONDS:
            raise ValueError(f"relay lease_seconds must be at least {RELAY_MIN_LEASE_SECONDS}")
        if not 0 <= self.advance_interval_seconds < self.lease_seconds:
            raise ValueError("relay advance_interval_seconds must be within 0..lease_seconds")
        if self.poll_interval_seconds <= 0 or self.deaf_poll_interval_seconds <= 0:
            raise ValueError("relay poll intervals must be positive")
        if not 0 < self.backoff_base_seconds <= self.backoff_cap_seconds:
            raise ValueError("relay backoff needs 0 < base <= cap")

    @property
    def rebalance_interval_seconds(self) -> float:
        return self.lease_seconds / 3


class OutboxRelayMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.published = labeled_counter(
            registry, "outbox_relay_published", "Outbox rows in committed Kafka transactions", {}
        )
        self.failed = labeled_counter(
            registry, "outbox_relay_failed", "Batches aborted and retried", {"reason": PublishError}
        )
        self.failed.initialize_all()
        self.fenced = labeled_counter(
            registry, "outbox_relay_fenced", "Shards lost to another relay while this one held them", {}
        )
        self.batch_seconds = labeled_histogram(
            registry, "outbox_relay_batch_seconds", "Read-publish-commit time of one batch", {}
        )
        self.backlog = labeled_gauge(
            registry, "outbox_relay_backlog", "Outbox rows not yet past their shard's cursor", {}
        )
        self.shards = labeled_gauge(registry, "outbox_relay_shards", "Shards this relay holds", {})


def transactional_id(names: KafkaNames, schema: Identifier, table: str, shard: int) -> str:
    """The Kafka transactional id of one outbox shard, under the deployment's prefix: the same for every
    relay of that shard, so a successor's init_transactions fences its predecessor."""
    return f"{names.prefix}{schema}.{table}.{shard}"


def _record_publish_spans(traced: list[tuple[str, Context]], started_ns: int) -> None:
    """A span per published row of a sampled trace, from its batch's send to its commit."""
    ended_ns = time.time_ns()
    attributes: dict[str, dict[str, str]] = {}
    for topic, parent in traced:
        if topic not in attributes:
            attributes[topic] = {
                "messaging.system": "kafka",
                "messaging.destination.name": topic,
                "messaging.operation.type": "publish",
            }
        record_span(
            _tracer,
            f"{topic} publish",
            parent=parent,
            kind=SpanKind.PRODUCER,
            start_ns=started_ns,
            end_ns=ended_ns,
            attributes=attributes[topic],
        )


def _headers(row: asyncpg.Record) -> list[tuple[str, str]]:
    raw = row["headers"]
    pairs = json.loads(raw) if isinstance(raw, str) else raw
    return [(str(k), str(v)) for k, v in pairs]


@dataclass
class _Shard:
    """One held shard: its lease and the task relaying it."""

    lease: ShardLease
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: bool = False
    task: asyncio.Task[None] | None = None

    def request_stop(self) -> None:
        self.stopping = True
        self.wake.set()


class OutboxRelay:
    """Publishes one schema's outbox to Kafka. Several publishers (processes) may run against the same
    schema; they split the shards between them."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        schema: Identifier,
        publisher_factory: PublisherFactory,
        *,
        owner: str,
        config: OutboxRelayConfig | None = None,
        metrics: OutboxRelayMetrics | None = None,
        names: KafkaNames | None = None,
    ) -> None:
        self._pool = pool
        self._schema = schema
        self._publisher_factory = publisher_factory
        self._owner = owner
        self._config = config or OutboxRelayConfig()
        self._metrics = metrics
        self._names = names or KafkaNames()
        self._cursors = ShardCursors(schema, OUTBOX_TABLE, owner, lease_seconds=self._config.lease_seconds)
        table = f"{schema.quoted}.{OUTBOX_TABLE}"
        self._windows = OutboxWindows(table, ("topic", "message_key", "value", "headers"))
        self._shards: dict[int, _Shard] = {}
        self._rebalance_now = asyncio.Event()
        self._listener: PoolConnectionProxy | None = None
        self._listener_lost = False  # its connection closed: the pool has already taken the proxy back
        cursors = f"{schema.quoted}.outbox_cursors"
        self._backlog_sql = unpassed_count_sql(schema, OUTBOX_TABLE)
        # Only rows every relevant cursor has passed go: a relayed row once its shard's prev_snapshot sees
        # its transaction, a row of the previous design (xid NULL) once it is old enough.
        self._prune_sql = f"""
            DELETE FROM {table} WHERE id IN (
                SELECT o.id FROM {table} o
                  LEFT JOIN {cursors} c ON c.outbox = '{OUTBOX_TABLE}' AND c.shard = o.shard
                 WHERE o.created_at < now() - make_interval(secs => $1)
                   AND (o.xid IS NULL OR pg_visible_in_snapshot(o.xid, c.prev_snapshot))
                 ORDER BY o.created_at LIMIT $2)
        """

    @property
    def owner(self) -> str:
        return self._owner

    def held_shards(self) -> set[int]:
        return {s for s, held in self._shards.items() if held.task is not None and not held.task.done()}

    @property
    def listening(self) -> bool:
        """Whether wake-ups are heard: the LISTEN connection is up."""
        return self._listener is not None and not self._listener_lost

    def idle_poll_seconds(self) -> float:
        """How long an idle shard waits for a wake-up before it reads anyway."""
        if self.listening:
            return self._config.poll_interval_seconds
        return min(self._config.poll_interval_seconds, self._config.deaf_poll_interval_seconds)

    # -- housekeeping -------------------------------------------------------------------------------------

    async def backlog(self) -> int:
        """Outbox rows not yet past their shard's stored cursor (committed rows only)."""
        async with self._pool.acquire() as conn:
            count: int = await conn.fetchval(self._backlog_sql)
        return count

    async def refresh_backlog(self) -> int:
        count = await self.backlog()
        if self._metrics is not None:
            self._metrics.backlog.labels().set(count)
        return count

    async def prune_published(self, *, batch_rows: int = OUTBOX_PRUNE_BATCH_ROWS) -> int:
        """Delete at most `batch_rows` rows older than the retention that their cursor has passed."""
        async with self._pool.acquire() as conn:
            status: str = await conn.execute(
                self._prune_sql, self._config.published_retention_seconds, batch_rows
            )
        return int(status.split()[-1])

    async def _housekeeping(self) -> None:
        try:
            await self.refresh_backlog()
            await self.prune_published()
        except DB_ERRORS as exc:
            log.warning("outbox housekeeping failed", extra={"error_code": type(exc).__name__})

    # -- coordination ---------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Relay until `stop` is set; database or broker trouble backs off, never exits."""
        async with self._pool.acquire() as conn:
            shards = await self._cursors.shard_count(conn)
        if shards != self._config.shards:
            raise OutboxShardsMismatch(
                detail=f"the outbox has {shards} shard cursors, not {self._config.shards}"
            )
        next_housekeeping = 0.0
        failures = 0
        try:
            while not stop.is_set():
                await self._keep_listening()
                if time.monotonic() >= next_housekeeping:
                    await self._housekeeping()
                    next_housekeeping = time.monotonic() + self._config.housekeeping_interval_seconds
                try:
                    await self._rebalance()
                    failures = 0
                except DB_ERRORS as exc:
                    failures += 1
                    log.warning("outbox relay rebalance failed", extra={"error_code": type(exc).__name__})
                delay = self._config.rebalance_interval_seconds
                if failures:
                    delay = min(
                        self._config.backoff_cap_seconds, self._config.backoff_base_seconds * 2**failures
                    )
                self._rebalance_now.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await _first_of(stop.wait(), self._rebalance_now.wait())
        finally:
            await self._stop_all()
            await self._unlisten()

    async def _rebalance(self) -> None:
        """Renew what this relay holds, hand back what belongs to another member, take what is free."""
        for shard in [s for s, held in self._shards.items() if held.task is not None and held.task.done()]:
            del self._shards[shard]
        async with self._pool.acquire() as conn:
            members = await self._cursors.join(conn)
            wanted = assigned_shards(members, self._owner, self._config.shards)
            held = {s: h.lease.epoch for s, h in self._shards.items() if not h.stopping}
            renewed = await self._cursors.renew(conn, held)
            for shard in held.keys() - renewed.keys():
                self._shards[shard].request_stop()  # taken over: the shard task will find out and stop
            for shard, held_shard in self._shards.items():
                if shard not in wanted:
                    held_shard.request_stop()
            leases = await self._cursors.acquire(conn, wanted - self._shards.keys())
        for lease in leases:
            held_shard = _Shard(lease)
            held_shard.task = asyncio.create_task(
                self._relay_shard(held_shard), name=f"outbox-relay-shard-{lease.shard}"
            )
            self._shards[lease.shard] = held_shard
        if self._metrics is not None:
            self._metrics.shards.labels().set(len(self.held_shards()))

    async def _stop_all(self) -> None:
        for held in self._shards.values():
            held.request_stop()
        tasks = [h.task for h in self._shards.values() if h.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._shards.clear()
        with contextlib.suppress(*DB_ERRORS):
            async with self._pool.acquire() as conn:
                await self._cursors.leave(conn)

    async def _keep_listening(self) -> None:
        """LISTEN on a connection of its own; after that connection was lost (a PostgreSQL restart, a
        network cut), on a new one, then wake every held shard for what committed while no one listened."""
        if self.listening:
            return
        await self._unlisten()
        try:
            conn: PoolConnectionProxy = await self._pool.acquire()
        except DB_ERRORS:
            return
        try:
            await conn.add_listener(notify_channel(self._schema), self._on_notify)
        except DB_ERRORS:
            with contextlib.suppress(*DB_ERRORS):
                await self._pool.release(conn)
            return
        # A lost connection sends the coordinator round here at once, not a rebalance interval later.
        conn.add_termination_listener(self._on_listener_lost)
        self._listener, self._listener_lost = conn, False
        for held in self._shards.values():
            held.wake.set()

    async def _unlisten(self) -> None:
        conn, self._listener = self._listener, None
        if conn is None or self._listener_lost:
            return
        with contextlib.suppress(*DB_ERRORS):
            conn.remove_termination_listener(self._on_listener_lost)
        with contextlib.suppress(*DB_ERRORS):
            await conn.remove_listener(notify_channel(self._schema), self._on_notify)
        with contextlib.suppress(*DB_ERRORS):
            await self._pool.release(conn)

    def _on_listener_lost(self, _conn: object) -> None:
        self._listener_lost = True
        self._rebalance_now.set()

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        text = str(payload)
        held = self._shards.get(int(text)) if text.isdigit() else None
        if held is not None:
            held.wake.set()

    # -- one shard ------------------------------------------------------------------------------------------

    async def _relay_shard(self, held: _Shard) -> None:
        shard = _ShardPublisher(self, held)
        try:
            await shard.run()
        except Exception:
            log.exception("outbox relay shard failed", extra={"shard": held.lease.shard})
        finally:
            self._rebalance_now.set()


class _ShardPublisher:
    """Relays one held shard until it is asked to stop or is taken over."""

    def __init__(self, relay: OutboxRelay, held: _Shard) -> None:
        self._relay = relay
        self._held = held
        self._shard = held.lease.shard
        self._epoch = held.lease.epoch
        self._persisted = held.lease.position  # what the stored cursor holds
        self._published = held.lease.position  # after the last batch committed to Kafka
        self._config = relay._config
        self._reader = WindowReader(
            relay._windows, self._shard, held.lease.position, relay._config.batch_size
        )
        self._publisher: TransactionalPublisher | None = None
        self._retry_at = time.monotonic() + held.lease.retry_in_seconds
        self._advancing: asyncio.Task[None] | None = None
        self._advance_due = 0.0
        self._fenced = False

    @property
    def _metrics(self) -> OutboxRelayMetrics | None:
        return self._relay._metrics

    async def run(self) -> None:
        try:
            await self._loop()
        except CursorFenced:
            self._fenced = True
        finally:
            await self._close_publisher()
            if self._fenced:
                await _quietly(self._advancing)
                log.warning("outbox shard taken over by another relay", extra={"shard": self._shard})
                if self._metrics is not None:
                    self._metrics.fenced.labels().inc()
            else:
                # Hand over a current cursor, so the next holder does not publish this relay's last batches
                # again.
                with contextlib.suppress(CursorFenced, *DB_ERRORS):
                    await self._advance_now()
                with contextlib.suppress(*DB_ERRORS):
                    async with self._relay._pool.acquire() as conn:
                        await self._relay._cursors.release(conn, self._shard, self._epoch)

    async def _wait(self, seconds: float) -> None:
        """Sleep up to `seconds`, or less if woken (new rows, stop)."""
        if seconds <= 0:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._held.wake.wait()

    async def _loop(self) -> None:
        prefetch: asyncio.Task[WindowBatch] | None = None
        try:
            while not self._held.stopping:
                if time.monotonic() < self._retry_at:
                    await self._wait(self._retry_at - time.monotonic())
                    continue
                if self._publisher is None and not await self._start_publisher():
                    continue
                try:
                    batch = await prefetch if prefetch is not None else await self._woken_read()
                except DB_ERRORS as exc:
                    prefetch = None
                    self._database_failed(exc)
                    continue
                prefetch = None
                if not batch.rows:
                    if self._published != self._persisted:
                        await self._advance_idle()
                        continue
                    await self._wait(self._relay.idle_poll_seconds())
                    continue
                started = time.monotonic()
                started_ns = time.time_ns()
                try:
                    traced = self._produce(batch)
                    if len(batch.rows) == self._config.batch_size:
                        # A backlog: read the next batch while this one's commit is outstanding. Otherwise
                        # read once it is done, so that rows committed meanwhile go in the next batch
                        # rather than wait a whole commit more behind a read taken too early.
                        prefetch = asyncio.create_task(self._woken_read())
                    assert self._publisher is not None
                    await self._publisher.commit()
                except PublishFailed as failure:
                    await _quietly(prefetch)
                    prefetch = None
                    await self._failed(failure, began=started)
                    continue
                self._published = batch.after
                if traced:
                    _record_publish_spans(traced, started_ns)
                self._advance_soon()
                if self._metrics is not None:
                    self._metrics.published.labels().inc(len(batch.rows))
                    self._metrics.batch_seconds.labels().observe(time.monotonic() - started)
        finally:
            await _quietly(prefetch)

    def _database_failed(self, exc: BaseException) -> None:
        """Back to the last committed batch after a read failed."""
        log.warning("outbox relay database call failed", extra={"error_code": type(exc).__name__})
        self._reader.reset(self._published)
        self._retry_at = time.monotonic() + self._config.backoff_base_seconds

    async def _woken_read(self) -> WindowBatch:
        """A read that consumes the wake-ups before it: a NOTIFY arriving after this point (even while a
        prefetch is in flight) stays set, so an empty prefetch never sleeps through a row committed
        meanwhile (it did, for a whole poll interval, when the wake was cleared after the prefetch began)."""
        self._held.wake.clear()
        async with self._relay._pool.acquire() as conn:
            return await self._reader.next_batch(conn)

    # -- the stored cursor ----------------------------------------------------------------------------------
    # Kafka's fence, not the cursor, keeps a relay that lost its shard from publishing (its successor's
    # init_transactions fences the shard's transactional id), so the cursor is written off the batch's path:
    # in the background, at most once per advance interval while rows flow, and at once when the shard goes
    # idle or is handed over. A stored cursor behind what was published only means that a successor after a
    # crash publishes those batches again: duplicates, in order, never a loss.

    def _advance_soon(self) -> None:
        """Start writing the published position if the interval has passed and no write is in flight;
        raise CursorFenced if the last write found the shard taken over."""
        if self._advancing is not None:
            if not self._advancing.done():
                return
            self._advanced(self._advancing)
        if time.monotonic() < self._advance_due:
            return
        self._advance_due = time.monotonic() + self._config.advance_interval_seconds
        self._advancing = asyncio.create_task(self._advance(self._published))

    def _advanced(self, task: asyncio.Task[None]) -> None:
        self._advancing = None
        exc = None if task.cancelled() else task.exception()
        if isinstance(exc, CursorFenced):
            raise exc
        if exc is not None:  # a database error: the next write tries again
            log.warning("outbox cursor not stored", extra={"error_code": type(exc).__name__})

    async def _advance_now(self) -> None:
        if self._advancing is not None:
            await _quietly(self._advancing)
            self._advanced(self._advancing)
        if self._published != self._persisted:
            await self._advance(self._published)

    async def _advance_idle(self) -> None:
        try:
            await self._advance_now()
        except DB_ERRORS as exc:
            log.warning("outbox cursor not stored", extra={"error_code": type(exc).__name__})
            self._retry_at = time.monotonic() + self._config.backoff_base_seconds

    async def _advance(self, position: WindowPosition) -> None:
        async with self._relay._pool.acquire() as conn:
            await self._relay._cursors.advance(conn, self._shard, self._epoch, position)
        self._persisted = position

    def _produce(self, batch: WindowBatch) -> list[tuple[str, Context]]:
        """Send the batch's rows in the publisher's transaction; the (topic, trace context) of those whose
        trace is sampled, to record their publish spans once committed (none while tracing is off)."""
        assert self._publisher is not None
        self._publisher.begin()
        topic = self._relay._names.topic
        send = self._publisher.send
        traced = []
        tracing = tracing_on()
        for row in batch.rows:
            headers = _headers(row)
            name = topic(row["topic"])
            send(name, row["value"], row["message_key"], headers)
            if tracing and (parent := sampled_parent(headers)) is not None:
                traced.append((name, parent))
        return traced

    async def _start_publisher(self) -> bool:
        relay = self._relay
        publisher = relay._publisher_factory(
            transactional_id(relay._names, relay._schema, OUTBOX_TABLE, self._shard)
        )
        began = time.monotonic()
        try:
            await publisher.start()
        except PublishFailed as failure:
            with contextlib.suppress(PublishFailed):
                await publisher.close()
            await self._back_off(failure.reason, began=began)
            return False
        self._publisher = publisher
        return True

    async def _failed(self, failure: PublishFailed, *, began: float) -> None:
        self._reader.reset(self._published)
        if failure.reason is PublishError.FENCED:
            raise CursorFenced()
        if failure.fatal:
            await self._close_publisher()
        else:
            await self._abort_quietly()
        await self._back_off(failure.reason, began=began)

    async def _back_off(self, reason: PublishError, *, began: float) -> None:
        """Wait before the next attempt: the backoff counts from when the failed attempt `began`. An attempt
        that failed fast (brokers refusing connections) waits it all; one that failed only when its call
        bound ran out (a broker stopped, a leader or coordinator moving: the failover has been under way
        for that long) is tried again at once, as is a commit that waited its bound and whose abort took the
        rest. So a shard tries at most once per backoff, and a failover costs no backoff on top of the
        failed call."""
        log.warning(
            "outbox batch not published; backing off", extra={"shard": self._shard, "error_code": reason}
        )
        if self._metrics is not None:
            self._metrics.failed.labels(reason=reason).inc()
        config = self._config
        try:
            async with self._relay._pool.acquire() as conn:
                wait = await self._relay._cursors.record_failure(
                    conn,
                    self._shard,
                    self._epoch,
                    reason.value,
                    base_seconds=config.backoff_base_seconds,
                    cap_seconds=config.backoff_cap_seconds,
                    jitter=RELAY_BACKOFF_JITTER,
                )
        except DB_ERRORS:
            wait = config.backoff_base_seconds
        self._retry_at = began + wait

    async def _abort_quietly(self) -> None:
        if self._publisher is None:
            return
        try:
            await self._publisher.abort()
        except PublishFailed:
            await self._close_publisher()

    async def _close_publisher(self) -> None:
        publisher, self._publisher = self._publisher, None
        if publisher is not None:
            with contextlib.suppress(Exception):
                await publisher.close()


async def _quietly(task: asyncio.Task[Any] | None) -> None:
    if task is not None:
        with contextlib.suppress(Exception):
            await task


async def _first_of(*waits: Any) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def executor_for(config: OutboxRelayConfig) -> concurrent.futures.ThreadPoolExecutor:
    """Threads for the publishers' blocking calls: one per shard that may commit at once, plus one."""
    return concurrent.futures.ThreadPoolExecutor(
        max_workers=config.shards + 1, thread_name_prefix="outbox-publisher"
    )
