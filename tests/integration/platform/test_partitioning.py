from __future__ import annotations

import uuid

from tests.support.kafka import read_topic
from tests.support.stack import Stack, create_topic, delete_topic
from yovision_platform.messaging import partition_for_key, start_producer

PARTITIONS = 12


async def test_the_broker_stores_each_key_on_the_partition_partition_for_key_predicts(stack: Stack) -> None:
    topic = f"test.{uuid.uuid4().hex[:10]}.v1"
    await create_topic(stack.kafka_bootstrap, topic, partitions=PARTITIONS)
    try:
        producer = await start_producer(stack.kafka_bootstrap, client_id="partition-test")
        try:
            # Fixed keys: which partitions they cover is decided once, not by chance on every run.
            keys = [f"device-{n:04d}".encode() for n in range(200)]
            for key in keys:
                await producer.send(topic, b"v", key=key)
            await producer.flush()
        finally:
            await producer.stop()
        records = await read_topic(stack.kafka_bootstrap, topic, expected=200, partitions=PARTITIONS)
        assert len(records) == 200
        assert all(r.key is not None and r.partition == partition_for_key(r.key, PARTITIONS) for r in records)
        assert len({r.partition for r in records}) == PARTITIONS
    finally:
        await delete_topic(stack.kafka_bootstrap, topic)
