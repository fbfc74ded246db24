"""aiokafka producer and consumer factories with the settings every service must share.

Producers are idempotent with `acks=all`: a retried send never duplicates within a producer session and
never reorders a partition. Consumers never auto-commit: the idempotent consumer commits offsets only after
the effect's database transaction committed.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.partitioner import murmur2

__all__ = ["create_consumer", "partition_for_key", "start_producer"]

PRODUCER_LINGER_MS = 5
RELAY_PRODUCER_LINGER_MS = 0
PRODUCER_REQUEST_TIMEOUT_MS = 10_000
PRODUCER_MAX_BATCH_BYTES = 256 * 1024
CONSUMER_SESSION_TIMEOUT_MS = 10_000
CONSUMER_HEARTBEAT_INTERVAL_MS = 3_000
CONSUMER_MAX_POLL_RECORDS = 500


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
    )
    if topics:
        consumer.subscribe(list(topics), listener=listener)
    return consumer


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition the producer's default partitioner picks for `key` (murmur2, as Kafka's Java client)."""
    if partitions < 1:
        raise ValueError("partitions must be >= 1")
    return int(murmur2(key) & 0x7FFFFFFF) % partitions
