"""Proves aiokafka works against the local broker: admin create topic, idempotent acks=all produce,
consumer group join + commit, list offsets. Run after a Kafka or aiokafka version change:
    .venv/bin/python infra/scripts/kafka_client_check.py [bootstrap]
"""

from __future__ import annotations

import asyncio
import sys
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

DEFAULT_BOOTSTRAP = "127.0.0.1:19092"
CHECK_TIMEOUT_S = 60.0
MESSAGE_COUNT = 5


async def check(bootstrap: str) -> None:
    topic = f"platform.client-check-{uuid.uuid4().hex[:8]}.v1"
    group = f"client-check-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
        print(f"created topic {topic}")

        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
        await producer.start()
        try:
            for i in range(MESSAGE_COUNT):
                meta = await producer.send_and_wait(topic, f"value-{i}".encode(), key=b"device-1")
            print(f"produced {MESSAGE_COUNT} (idempotent, acks=all), last at p{meta.partition}@{meta.offset}")
        finally:
            await producer.stop()

        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            received = 0
            while received < MESSAGE_COUNT:
                batches = await consumer.getmany(timeout_ms=1000)
                received += sum(len(records) for records in batches.values())
            await consumer.commit()
            assigned = sorted(consumer.assignment())
            committed = {tp.partition: await consumer.committed(tp) for tp in assigned}
            end_offsets = await consumer.end_offsets(assigned)
            print(f"group {group} joined, consumed {received}, committed {committed}")
            print(f"end offsets { {tp.partition: off for tp, off in end_offsets.items()} }")
            earliest = await consumer.beginning_offsets([TopicPartition(topic, 0)])
            print(f"beginning offsets { {tp.partition: off for tp, off in earliest.items()} }")
        finally:
            await consumer.stop()

        await admin.delete_topics([topic])
        print(f"deleted topic {topic}")
    finally:
        await admin.close()


if __name__ == "__main__":
    bootstrap = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_BOOTSTRAP
    asyncio.run(asyncio.wait_for(check(bootstrap), CHECK_TIMEOUT_S))
    print("aiokafka client check: OK")
