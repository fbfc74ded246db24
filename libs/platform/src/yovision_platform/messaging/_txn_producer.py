"""Kafka transactional publishing for the outbox relay, on confluent-kafka (librdkafka).

A `TransactionalPublisher` publishes one batch per Kafka transaction under one ``transactional.id`` (one per
outbox shard). `start` runs ``init_transactions``, which also fences any earlier producer with the same id
at the broker: a relay paused past its lease cannot commit once its successor started. `commit` waits for
every message of the batch and the commit; any failure raises `PublishFailed`, and after `abort` nothing
of the batch is visible to ``read_committed`` consumers, so a later row of a key can never show before an
earlier one that failed.

librdkafka runs its own threads. Every call that can block (``init_transactions``, ``commit_transaction``,
``abort_transaction``, ``begin_transaction``, ``poll``, ``close``) runs in an executor thread, never on the
event loop: the next transaction is begun on the thread that ended the last one. ``produce`` only
enqueues locally. Delivery reports are requested for failures only
(``delivery.report.only.error``): they and client errors arrive on the thread that polls and are handed to
the event loop with ``call_soon_threadsafe``, where they classify the failure.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from yovision_platform.errors import PlatformError
from yovision_platform.messaging._kafka_security import KafkaTarget, kafka_connection

__all__ = [
    "ConfluentPublisher",
    "Header",
    "PublishError",
    "PublishFailed",
    "PublisherFactory",
    "TransactionalPublisher",
    "confluent_publisher_factory",
]

# Measured (docs/benchmarks.md): the commit flushes at once, so linger only groups what is sent while a
# batch is still being produced.
PUBLISHER_LINGER_MS = 5
KAFKA_PARTITIONER = "murmur2_random"
PUBLISHER_CALL_TIMEOUT_SECONDS = 10.0
# A commit that failed with a retriable error (its answer lost, the coordinator moving after a broker died)
# is asked again once, for the same transaction, before the relay aborts it and publishes the batch again:
# librdkafka allows the retry, and a retry that succeeds publishes nothing twice.
PUBLISHER_COMMIT_ATTEMPTS = 2
# A transaction left open (a paused relay) blocks read_committed consumers of its partitions until the
# successor's init_transactions aborts it, or until this timeout.
PUBLISHER_TRANSACTION_TIMEOUT_MS = 60_000
PUBLISHER_MAX_MESSAGE_BYTES = 1024 * 1024
PUBLISHER_QUEUE_MAX_MESSAGES = 100_000
PUBLISHER_RETRY_BACKOFF_MS = 10
PUBLISHER_RETRY_BACKOFF_MAX_MS = 200

Header = tuple[str, str | bytes]
# librdkafka's own log lines, served by poll on the executor threads, go through the service's logging.
LIBRDKAFKA_LOG = logging.getLogger("yovision_platform.librdkafka")


class PublishError(enum.StrEnum):
    BROKER_UNAVAILABLE = "broker_unavailable"
    TIMEOUT = "timeout"
    REJECTED = "message_rejected"
    FENCED = "producer_fenced"
    AUTHENTICATION = "kafka_authentication_failed"
    TLS = "kafka_tls_failed"
    UNKNOWN = "unknown_error"


class PublishFailed(PlatformError):
    """A batch was not committed. `fatal`: the publisher is unusable and must be replaced (or, when
    `reason` is FENCED, the shard now belongs to another relay)."""

    code = "publish_failed"

    def __init__(self, reason: PublishError, *, fatal: bool = False) -> None:
        super().__init__(detail=reason.value)
        self.reason = reason
        self.fatal = fatal


class TransactionalPublisher(Protocol):
    async def start(self) -> None: ...
    def begin(self) -> None: ...
    def send(self, topic: str, value: bytes, key: bytes, headers: Sequence[Header]) -> None: ...
    async def commit(self) -> None: ...
    async def abort(self) -> None: ...
    async def close(self) -> None: ...


PublisherFactory = Callable[[str], TransactionalPublisher]

_FENCED_CODES = frozenset({KafkaError.PRODUCER_FENCED, KafkaError._FENCED, KafkaError.INVALID_PRODUCER_EPOCH})
# librdkafka reports a refused handshake as these (client errors, also on init_transactions' timeout path).
_AUTHENTICATION_CODES = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})
_TLS_CODES = frozenset({KafkaError._SSL})
_UNAVAILABLE_CODES = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        # The coordinator still finishing the previous transaction (seen right after a failover).
        KafkaError.CONCURRENT_TRANSACTIONS,
    }
)
_TIMEOUT_CODES = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TIMED_OUT_QUEUE,
    }
)


def classify(errors: Sequence[KafkaError]) -> PublishError:
    """The reason of a failure from the errors seen, most telling first: fencing, refused credentials or
    certificate, an unreachable broker, a timeout, a refused message."""
    codes = {error.code() for error in errors}
    if codes & _FENCED_CODES:
        return PublishError.FENCED
    if codes & _AUTHENTICATION_CODES:
        return PublishError.AUTHENTICATION
    if codes & _TLS_CODES:
        return PublishError.TLS
    if codes & _UNAVAILABLE_CODES:
        return PublishError.BROKER_UNAVAILABLE
    if codes & _TIMEOUT_CODES:
        return PublishError.TIMEOUT
    if codes:
        return PublishError.REJECTED
    return PublishError.UNKNOWN


class ConfluentPublisher:
    """One librdkafka transactional producer. Use from one task at a time."""

    def __init__(
        self,
        kafka: KafkaTarget,
        transactional_id: str,
        *,
        client_id: str,
        executor: concurrent.futures.Executor,
        call_timeout_seconds: float = PUBLISHER_CALL_TIMEOUT_SECONDS,
        linger_ms: int = PUBLISHER_LINGER_MS,
        extra_config: dict[str, Any] | None = None,
    ) -> None:
        self._executor = executor
        self._timeout = call_timeout_seconds
        # Delivery failures of this transaction's messages, and the client's own reports (error_cb: a
        # broker connection lost, a broker down...). Both name the reason of a failed call; only a
        # delivery failure can make a committed transaction suspect. A client report during a commit
        # that succeeded is no failure: the relay once failed such a batch and published it again.
        self._errors: list[KafkaError] = []
        self._client_errors: list[KafkaError] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._config: dict[str, Any] = {
            **kafka_connection(kafka).confluent_config(),
            "client.id": client_id,
            "transactional.id": transactional_id,
            "enable.idempotence": True,
            "acks": "all",
            # Kafka's Java partitioner (as aiokafka's and `partition_for_key`): a key's partition is the one
            # the rest of the platform computes, and a shard's rows go to one partition of a topic with
            # OUTBOX_SHARDS partitions. librdkafka's default (CRC32) spread them over every partition.
            "partitioner": KAFKA_PARTITIONER,
            "linger.ms": linger_ms,
            "transaction.timeout.ms": PUBLISHER_TRANSACTION_TIMEOUT_MS,
            # A message outlives both commit calls: one queued for a partition whose leader died is sent to
            # the new leader when the brokers name one, rather than failing the transaction first (the
            # session timeout of the brokers, 9 s, raced a 10 s message timeout). A request left unanswered
            # (a stopped broker) gives up within one call bound, and the client asks for the leader or
            # coordinator again (librdkafka's default is 60 s).
            "message.timeout.ms": int(call_timeout_seconds * PUBLISHER_COMMIT_ATTEMPTS * 1000),
            "socket.timeout.ms": int(call_timeout_seconds * 1000),
            "socket.connection.setup.timeout.ms": int(call_timeout_seconds * 1000),
            "message.max.bytes": PUBLISHER_MAX_MESSAGE_BYTES,
            "queue.buffering.max.messages": PUBLISHER_QUEUE_MAX_MESSAGES,
            "retry.backoff.ms": PUBLISHER_RETRY_BACKOFF_MS,
            "retry.backoff.max.ms": PUBLISHER_RETRY_BACKOFF_MAX_MS,
            "delivery.report.only.error": True,
            "on_delivery": self._on_delivery,
            "error_cb": self._on_client_error,
            "logger": LIBRDKAFKA_LOG,
            **(extra_config or {}),
        }
        self._producer: Producer | None = None
        self._open = False  # a transaction begun and not yet committed or aborted

    # librdkafka threads (the one polling): hand errors to the loop, touch nothing else.
    def _on_delivery(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._errors.append, error)

    def _on_client_error(self, error: KafkaError) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._client_errors.append, error)

    async def _blocking(self, call: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(call, *args))

    async def _failed(self, exc: KafkaException) -> PublishFailed:
        error: KafkaError = exc.args[0]
        if self._producer is not None:
            with contextlib.suppress(KafkaException):  # a fatally failed client may refuse even this
                await self._blocking(self._producer.poll, 0)  # serve queued callbacks
        await asyncio.sleep(0)  # let the call_soon_threadsafe hand-overs run
        seen = [error, *self._errors, *self._client_errors]
        self._errors.clear()
        self._client_errors.clear()
        reason = classify(seen)
        return PublishFailed(reason, fatal=reason is PublishError.FENCED or error.fatal())

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._producer = Producer(self._config)
        try:
            self._open = await self._blocking(
                _then_begin, self._producer, self._producer.init_transactions, self._timeout
            )
        except KafkaException as exc:
            failure = await self._failed(exc)
            raise PublishFailed(failure.reason, fatal=True) from None

    def _started(self) -> Producer:
        if self._producer is None:
            raise RuntimeError("publisher not started")
        return self._producer

    def begin(self) -> None:
        """Start a transaction: usually already begun, on an executor thread, by the call that ended the
        last one (`begin_transaction` waits for librdkafka's main thread; measured blocking the event loop
        for 13% of a relay's time under a paced load)."""
        self._errors.clear()
        self._client_errors.clear()
        if self._open:
            return
        try:
            self._started().begin_transaction()
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            raise PublishFailed(classify([error]), fatal=True) from None
        self._open = True

    def send(self, topic: str, value: bytes, key: bytes, headers: Sequence[Header]) -> None:
        try:
            self._started().produce(topic, value, key, headers=list(headers))
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            raise PublishFailed(classify([error]), fatal=error.fatal()) from None
        except BufferError:
            raise PublishFailed(PublishError.REJECTED) from None

    async def commit(self) -> None:
        producer = self._started()
        self._open = False
        for attempt in range(1, PUBLISHER_COMMIT_ATTEMPTS + 1):
            try:
                self._open = await self._blocking(
                    _then_begin, producer, producer.commit_transaction, self._timeout
                )
                break
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if attempt == PUBLISHER_COMMIT_ATTEMPTS or not _commit_retriable(error):
                    raise await self._failed(exc) from None
        self._client_errors.clear()
        if self._errors:  # a delivery failure reported although the commit went through: cannot happen
            raise PublishFailed(classify(self._errors), fatal=True)

    async def abort(self) -> None:
        producer = self._started()
        self._open = False
        try:
            self._open = await self._blocking(
                _then_begin, producer, producer.abort_transaction, self._timeout
            )
        except KafkaException as exc:
            failure = await self._failed(exc)
            raise PublishFailed(failure.reason, fatal=True) from None

    async def close(self) -> None:
        """Drop what is queued and destroy the client on an executor thread (destroying waits for
        librdkafka's threads). Producer.close() is not used: after a failed init_transactions it tries an
        abort and warns."""
        if self._producer is None:
            return
        holder = [self._producer]
        self._producer = None
        await self._blocking(_destroy, holder)


def _commit_retriable(error: KafkaError) -> bool:
    return bool(error.retriable()) and not error.txn_requires_abort() and not error.fatal()


def _then_begin(producer: Producer, end: Callable[[float], None], timeout: float) -> bool:
    """`end` (init, commit or abort) and, once it succeeded, the next transaction's begin, in one executor
    call; whether that begin succeeded (if not, `begin` tries again and reports the error). An open
    transaction with nothing sent is local to the client (the coordinator hears of it at the first send),
    so it holds nothing at the broker while the shard is idle."""
    end(timeout)
    try:
        producer.begin_transaction()
    except KafkaException:
        return False
    return True


def _destroy(holder: list[Producer]) -> None:
    holder[0].purge()
    holder.clear()  # the last reference: rd_kafka_destroy runs here, off the event loop


def confluent_publisher_factory(
    kafka: KafkaTarget,
    *,
    client_id: str,
    executor: concurrent.futures.Executor,
    call_timeout_seconds: float = PUBLISHER_CALL_TIMEOUT_SECONDS,
    linger_ms: int = PUBLISHER_LINGER_MS,
) -> PublisherFactory:
    """Publishers that share `executor` (it needs a thread per shard that may commit at once)."""

    def factory(transactional_id: str) -> TransactionalPublisher:
        return ConfluentPublisher(
            kafka,
            transactional_id,
            client_id=client_id,
            executor=executor,
            call_timeout_seconds=call_timeout_seconds,
            linger_ms=linger_ms,
        )

    return factory
