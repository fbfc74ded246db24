"""aiokafka producer and consumer factories with the settings every service must share.

Producers are idempotent with `acks=all`: a retried send never duplicates within a producer session and
never reorders a partition. Consumers never auto-commit: the idempotent consumer commits offsets only after
the effect's database transaction committed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.partitioner import murmur2

from yovision_platform.errors import PlatformError

__all__ = ["TopicUnavailable", "create_consumer", "fetch_end_offsets", "partition_for_key", "start_producer"]

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


async def start_producer(
    bootstrap: str, *, client_id: str, linger_ms: int = PRODUCER_LINGER_MS
) -> AIOKafkaProducer:
    """Create and start an idempotent producer. Raises aiokafka's KafkaConnectionError if unreachable.

    `linger_ms` trades latency for batching; a caller that awaits every acknowledgement before sending more
    (the outbox relay) gains nothing from lingering and should pass 0.
    """
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        acks="all",
        enable_idempotence=True,
        linger_ms=linger_ms,
        request_timeout_ms=PRODUCER_REQUEST_TIMEOUT_MS,
        max_batch_size=PRODUCER_MAX_BATCH_BYTES,
        retry_backoff_ms=KAFKA_RETRY_BACKOFF_MS,
    )
    try:
        await producer.start()
    except BaseException:
        await producer.stop()
        raise
    return producer


def create_consumer(
    bootstrap: str,
    *,
    group_id: str,
    client_id: str,
    topics: Sequence[str] = (),
    listener: ConsumerRebalanceListener | None = None,
    auto_offset_reset: str = "earliest",
) -> AIOKafkaConsumer:
    """Create (not start) a consumer subscribed to `topics`; `listener` sees assignment changes."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
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
    bootstrap: str, topics: Sequence[str], *, client_id: str, timeout_seconds: float = 10.0
) -> dict[TopicPartition, int]:
    """The current end offset of every partition of `topics` (last stable offset: read_committed).

    For a "has my projection caught up?" check: a consumer whose stored position reaches these offsets has
    applied everything published before the call. Raises `TopicUnavailable` for an unknown topic and
    TimeoutError when the broker does not answer in time. Joins no consumer group.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    try:
        async with asyncio.timeout(timeout_seconds):
            await admin.start()
            described = await admin.describe_topics(list(topics))
            partitions: list[TopicPartition] = []
            for topic in described:
                if topic["error_code"] != 0 or not topic["partitions"]:
                    raise TopicUnavailable(detail="a requested topic does not exist")
                partitions += [TopicPartition(topic["topic"], p["partition"]) for p in topic["partitions"]]
            await consumer.start()
            ends = await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()
        await admin.close()
    return {tp: int(offset) for tp, offset in ends.items()}
