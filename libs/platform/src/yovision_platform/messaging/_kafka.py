"""aiokafka producer and consumer factories with the settings every service must share.

Producers are idempotent with `acks=all`: a retried send never duplicates within a producer session and
never reorders a partition. Consumers never auto-commit: the idempotent consumer commits offsets only after
the effect's database transaction committed.

Every client is built from a `KafkaConnection` (or a bare bootstrap string: PLAINTEXT), so the security
settings reach each one (:mod:`yovision_platform.messaging`). A client that cannot start because the
broker refused it (bad credentials, an untrusted certificate) raises `KafkaAccessRefused` with a stable code,
not aiokafka's generic "unable to bootstrap".
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.conn import create_conn
from aiokafka.errors import (
    AuthenticationFailedError,
    IllegalSaslStateError,
    KafkaConnectionError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)
from aiokafka.partitioner import murmur2

from yovision_platform.errors import PlatformError
from yovision_platform.messaging._kafka_security import KafkaTarget, kafka_connection

__all__ = [
    "KafkaAccessRefused",
    "TopicUnavailable",
    "admin_client",
    "create_consumer",
    "fetch_end_offsets",
    "partition_for_key",
    "plain_consumer",
    "seek_to_start",
    "start_client",
    "start_producer",
]

PRODUCER_LINGER_MS = 5
PRODUCER_REQUEST_TIMEOUT_MS = 10_000
PRODUCER_MAX_BATCH_BYTES = 256 * 1024
CONSUMER_SESSION_TIMEOUT_MS = 10_000
CONSUMER_HEARTBEAT_INTERVAL_MS = 3_000
CONSUMER_MAX_POLL_RECORDS = 500
# aiokafka 0.14 has one fixed retry interval for every internal retry (metadata, coordinator, fetch, send)
# and no reconnect backoff of its own (no reconnect_backoff_max_ms). Its default, 100 ms, retried ten times
# a second through a broker outage; 1 s keeps recovery within a second of the broker's return. The capped
# exponential part lives where we own the loop: the supervisor's restarts and the consumer's retries.
KAFKA_RETRY_BACKOFF_MS = 1_000
KAFKA_PROBE_TIMEOUT_SECONDS = 10.0
AUTHENTICATION_ERRORS = (
    SaslAuthenticationFailed,
    AuthenticationFailedError,
    UnsupportedSaslMechanismError,
    IllegalSaslStateError,
)


class KafkaAccessRefused(PlatformError):
    """The broker answered but refused this client: `code` is ``kafka_authentication_failed`` (SASL
    credentials or mechanism) or ``kafka_tls_failed`` (the broker's certificate is not trusted, or does not
    name the host). A configuration fault: retrying does not help until the settings change."""

    code = "kafka_access_refused"


class _Startable(Protocol):
    async def start(self) -> None: ...


async def start_client(
    client: _Startable, kafka: KafkaTarget, *, close: Callable[[], Awaitable[Any]]
) -> None:
    """Start an aiokafka client built from `kafka`; on failure `close` it and raise. A failure to bootstrap
    is diagnosed on one direct connection: `KafkaAccessRefused` when the broker refused us, else the
    original error (the broker is unreachable)."""
    try:
        await client.start()
    except BaseException as exc:
        await close()
        if isinstance(exc, KafkaConnectionError):
            await _raise_if_refused(kafka)
        raise


async def _raise_if_refused(kafka: KafkaTarget) -> None:
    connection = kafka_connection(kafka)
    host, port = connection.first_broker()
    options = connection.aiokafka_kwargs()
    options.pop("bootstrap_servers")
    try:
        async with asyncio.timeout(KAFKA_PROBE_TIMEOUT_SECONDS):
            conn = await create_conn(host, port, client_id="yovision-probe", **options)
        conn.close()
    except AUTHENTICATION_ERRORS:
        raise KafkaAccessRefused("kafka_authentication_failed") from None
    except ssl.SSLError:  # SSLCertVerificationError is one
        raise KafkaAccessRefused("kafka_tls_failed") from None
    except Exception:  # unreachable, or no verdict: the caller's own error says so
        return


def admin_client(
    kafka: KafkaTarget, *, client_id: str = "yovision-admin", **options: Any
) -> AIOKafkaAdminClient:
    """An admin client (not started: `await start_client(admin, kafka, close=admin.close)`)."""
    return AIOKafkaAdminClient(**kafka_connection(kafka).aiokafka_kwargs(), client_id=client_id, **options)


def plain_consumer(kafka: KafkaTarget, **options: Any) -> AIOKafkaConsumer:
    """A consumer with the connection's security and exactly `options` (tools that read without a group)."""
    return AIOKafkaConsumer(**kafka_connection(kafka).aiokafka_kwargs(), **options)


async def seek_to_start(consumer: AIOKafkaConsumer, partitions: Sequence[TopicPartition]) -> None:
    """Position assigned `partitions` at their first offset, each with an explicit `seek`.

    Never `seek_to_beginning`: in aiokafka 0.14 a default reset that `assign` started (to the end, under
    the default `auto_offset_reset="latest"`) and that is still in flight is applied to a partition that
    `seek_to_beginning` asked to reset meanwhile, because the fetcher checks only that the partition still
    awaits a reset, not which one. The position then lands at the end and the reader sees nothing: the
    benchmarks' `delivered 0` (measured: three fresh topics of four when an `end_offsets` call came
    between the two). An explicit `seek` ends any pending reset, so a late answer is dropped."""
    starts = await consumer.beginning_offsets(list(partitions))
    for tp in partitions:
        consumer.seek(tp, starts[tp])


async def start_producer(
    kafka: KafkaTarget, *, client_id: str, linger_ms: int = PRODUCER_LINGER_MS
) -> AIOKafkaProducer:
    """Create and start an idempotent producer. Raises aiokafka's KafkaConnectionError if unreachable,
    `KafkaAccessRefused` if the broker refused the client.

    `linger_ms` trades latency for batching; a caller that awaits every acknowledgement before sending more
    (the outbox relay) gains nothing from lingering and should pass 0.
    """
    producer = AIOKafkaProducer(
        **kafka_connection(kafka).aiokafka_kwargs(),
        client_id=client_id,
        acks="all",
        enable_idempotence=True,
        linger_ms=linger_ms,
        request_timeout_ms=PRODUCER_REQUEST_TIMEOUT_MS,
        max_batch_size=PRODUCER_MAX_BATCH_BYTES,
        retry_backoff_ms=KAFKA_RETRY_BACKOFF_MS,
    )
    await start_client(producer, kafka, close=producer.stop)
    return producer


def create_consumer(
    kafka: KafkaTarget,
    *,
    group_id: str,
    client_id: str,
    topics: Sequence[str] = (),
    listener: ConsumerRebalanceListener | None = None,
    auto_offset_reset: str = "earliest",
) -> AIOKafkaConsumer:
    """Create (not start: `start_client(consumer, kafka, close=consumer.stop)`) a consumer subscribed to
    `topics`; `listener` sees assignment changes."""
    consumer = plain_consumer(
        kafka,
        group_id=group_id,
        client_id=client_id,
        enable_auto_commit=False,
        auto_offset_reset=auto_offset_reset,
        isolation_level="read_committed",
        session_timeout_ms=CONSUMER_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=CONSUMER_HEARTBEAT_INTERVAL_MS,
        max_poll_records=CONSUMER_MAX_POLL_RECORDS,
        retry_backoff_ms=KAFKA_RETRY_BACKOFF_MS,
    )
    if topics:
        consumer.subscribe(list(topics), listener=listener)
    return consumer


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition the producer's default partitioner picks for `key` (murmur2, as Kafka's Java client)."""
    if partitions < 1:
        raise ValueError("partitions must be >= 1")
    return int(murmur2(key) & 0x7FFFFFFF) % partitions


class TopicUnavailable(PlatformError):
    code = "topic_unavailable"


async def fetch_end_offsets(
    kafka: KafkaTarget, topics: Sequence[str], *, client_id: str, timeout_seconds: float = 10.0
) -> dict[TopicPartition, int]:
    """The current end offset of every partition of `topics` (last stable offset: read_committed).

    For a "has my projection caught up?" check: a consumer whose stored position reaches these offsets has
    applied everything published before the call. Raises `TopicUnavailable` for an unknown topic and
    TimeoutError when the broker does not answer in time. Joins no consumer group.
    """
    admin = admin_client(kafka, client_id=client_id)
    consumer = plain_consumer(
        kafka,
        client_id=client_id,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    try:
        async with asyncio.timeout(timeout_seconds):
            await start_client(admin, kafka, close=admin.close)
            described = await admin.describe_topics(list(topics))
            partitions: list[TopicPartition] = []
            for topic in described:
                if topic["error_code"] != 0 or not topic["partitions"]:
                    raise TopicUnavailable(detail="a requested topic does not exist")
                partitions += [TopicPartition(topic["topic"], p["partition"]) for p in topic["partitions"]]
            await start_client(consumer, kafka, close=consumer.stop)
            ends = await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()
        await admin.close()
    return {tp: int(offset) for tp, offset in ends.items()}
