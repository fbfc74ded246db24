"""A reader that starts at the beginning of a topic reads every record, on fresh topics, many times over.

The benchmarks' `delivered 0` (issue 25): their counter assigned the partitions, asked `end_offsets`, then
`seek_to_beginning`. aiokafka 0.14 applies the answer of the default reset that `assign` started (to the
end: `auto_offset_reset="latest"`) to a partition that `seek_to_beginning` asked to reset meanwhile, so the
counter sat at the end and counted nothing for its whole deadline. Measured against a fresh broker: three
fresh topics of four read 0 of 6,000 records that way; with `kafka.seek_to_start` six of six read all.
Every reader of the project that starts at the beginning uses `seek_to_start` (the doctor, the benchmarks'
counters, the tests' topic readers); the services' consumers never reset on demand: they `seek` to their
stored positions, which ends any pending reset, and their default reset is the earliest offset."""

from __future__ import annotations

import uuid

from aiokafka import TopicPartition

from tests.support.stack import Stack, create_topic, delete_topic
from yovision_platform.messaging import plain_consumer, seek_to_start, start_producer

ROUNDS = 6
PARTITIONS = 6
RECORDS = 600


async def test_a_reader_at_the_start_of_a_fresh_topic_reads_every_record_each_time(stack: Stack) -> None:
    counted = []
    for _ in range(ROUNDS):
        topic = f"test.start.{uuid.uuid4().hex[:10]}.v1"
        await create_topic(stack.kafka_bootstrap, topic, partitions=PARTITIONS)
        try:
            producer = await start_producer(stack.kafka_bootstrap, client_id="test-start")
            try:
                for n in range(RECORDS):
                    await producer.send(topic, f"{n}".encode(), key=f"key-{n % 60}".encode())
                await producer.flush()
            finally:
                await producer.stop()
            # the default reset (to the end), the one the old counter raced with
            consumer = plain_consumer(stack.kafka_bootstrap, group_id=None, enable_auto_commit=False)
            await consumer.start()
            try:
                tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
                consumer.assign(tps)
                ends = await consumer.end_offsets(tps)  # the await that let the default reset go out first
                await seek_to_start(consumer, tps)
                assert [await consumer.position(tp) for tp in tps] == [0] * PARTITIONS
                records = 0
                while any([await consumer.position(tp) < ends[tp] for tp in tps]):
                    batch = await consumer.getmany(timeout_ms=500)
                    records += sum(len(messages) for messages in batch.values())
                counted.append(records)
            finally:
                await consumer.stop()
        finally:
            await delete_topic(stack.kafka_bootstrap, topic)
    assert counted == [RECORDS] * ROUNDS
