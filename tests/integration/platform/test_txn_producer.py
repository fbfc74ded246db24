"""The transactional publisher on a real broker: every blocking librdkafka call runs off the event loop,
including the begin of the next transaction, and an aborted transaction leaves nothing visible."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from confluent_kafka import Producer

from tests.support.kafka import publishers, read_topic
from tests.support.stack import Stack
from yovision_platform.messaging import ConfluentPublisher, partition_for_key


class _CallThreads:
    """Wraps a librdkafka producer and notes the thread of each transaction call."""

    def __init__(self, inner: Producer) -> None:
        self._inner = inner
        self.calls: list[tuple[str, int]] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not name.endswith("_transaction") and name != "init_transactions":
            return attribute

        def noted(*args: Any) -> Any:
            self.calls.append((name, threading.get_ident()))
            return attribute(*args)

        return noted


async def test_each_transaction_is_begun_off_the_event_loop_and_only_committed_records_are_read(
    stack: Stack, topic: str
) -> None:
    loop_thread = threading.get_ident()
    with publishers(stack.kafka_bootstrap) as factory:
        publisher = factory(f"test-begin-{uuid.uuid4().hex[:8]}")
        assert isinstance(publisher, ConfluentPublisher)
        await publisher.start()
        assert publisher._producer is not None
        watched = _CallThreads(publisher._producer)
        publisher._producer = watched  # type: ignore[assignment]
        try:
            for round_number, end in enumerate(("commit", "abort", "commit")):
                publisher.begin()
                publisher.send(topic, f"{end}-{round_number}".encode(), b"k", [])
                await (publisher.commit() if end == "commit" else publisher.abort())
        finally:
            await publisher.close()
    assert [name for name, _ in watched.calls] == [
        "commit_transaction",
        "begin_transaction",
        "abort_transaction",
        "begin_transaction",
        "commit_transaction",
        "begin_transaction",
    ]
    assert all(thread != loop_thread for _, thread in watched.calls)
    records = await read_topic(stack.kafka_bootstrap, topic, expected=2, timeout_seconds=10)
    assert sorted(r.value for r in records) == [b"commit-0", b"commit-2"]


async def test_a_key_goes_to_the_partition_the_platform_computes_for_it(stack: Stack, topic: str) -> None:
    """Kafka's Java partitioner (murmur2), as aiokafka and `partition_for_key`: Sense assigns a device's
    reconciliation to the partition it computes, and a shard's rows then go to one partition."""
    keys = [f"device-{n}".encode() for n in range(60)]
    with publishers(stack.kafka_bootstrap) as factory:
        publisher = factory(f"test-partitioner-{uuid.uuid4().hex[:8]}")
        await publisher.start()
        try:
            publisher.begin()
            for key in keys:
                publisher.send(topic, b"v", key, [])
            await publisher.commit()
        finally:
            await publisher.close()
    records = await read_topic(stack.kafka_bootstrap, topic, expected=len(keys), timeout_seconds=10)
    assert sorted(r.key for r in records) == sorted(keys)
    assert {r.key: r.partition for r in records} == {key: partition_for_key(key, 3) for key in keys}
