"""The 60 s held transaction, as its own process, so that it runs while the rest of the suite runs.

    python held_transaction_probe.py RESULT_FILE

Env: TEST_RUNTIME_DSN, TEST_SCHEMA, TEST_BOOTSTRAP, TEST_TOPIC, TEST_HOLD_SECONDS. A relay runs; one
transaction enqueues a row of key ``held`` and stays open for the hold; meanwhile a row is enqueued every
PROBE_INTERVAL_SECONDS, some in the held row's shard and some in others. A read_committed consumer notes
when each row arrives. RESULT_FILE gets JSON: per row its key, enqueue and arrival times (monotonic, this
process), and the held transaction's commit time.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg
from aiokafka import AIOKafkaConsumer, TopicPartition

from yovision_platform.messaging import (
    OUTBOX_SHARDS,
    Outbox,
    OutboxMessage,
    OutboxRelay,
    OutboxRelayConfig,
    confluent_publisher_factory,
    partition_for_key,
    seek_to_start,
)
from yovision_platform.storage import Identifier

PROBE_INTERVAL_SECONDS = 0.5
PARTITIONS = 3
ARRIVAL_TIMEOUT_SECONDS = 60.0
HELD_KEY = b"held"


def keys_by_shard() -> tuple[bytes, bytes]:
    """A key in the held row's shard and one in another shard."""
    held = partition_for_key(HELD_KEY, OUTBOX_SHARDS)
    same = next(k for i in range(1000) if partition_for_key(k := f"same-{i}".encode(), OUTBOX_SHARDS) == held)
    other = next(
        k for i in range(1000) if partition_for_key(k := f"other-{i}".encode(), OUTBOX_SHARDS) != held
    )
    return same, other


def message(topic: str, key: bytes, value: str) -> OutboxMessage:
    return OutboxMessage(uuid.uuid4(), "TestEvent", topic, key, value.encode())


async def consume(consumer: AIOKafkaConsumer, arrived: dict[str, float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        batch = await consumer.getmany(timeout_ms=100)
        now = time.monotonic()
        for records in batch.values():
            for record in records:
                arrived.setdefault(record.value.decode(), now)


async def main(result_file: Path) -> None:
    topic = os.environ["TEST_TOPIC"]
    hold = float(os.environ["TEST_HOLD_SECONDS"])
    pool = await asyncpg.create_pool(os.environ["TEST_RUNTIME_DSN"], min_size=2, max_size=8)
    assert pool is not None
    outbox = Outbox(Identifier(os.environ["TEST_SCHEMA"]))
    consumer = AIOKafkaConsumer(
        bootstrap_servers=os.environ["TEST_BOOTSTRAP"],
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    await consumer.start()
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    await seek_to_start(consumer, partitions)
    arrived: dict[str, float] = {}
    enqueued: dict[str, tuple[str, float]] = {}
    stop = asyncio.Event()
    same, other = keys_by_shard()
    with ThreadPoolExecutor(max_workers=8) as executor:
        publishers = confluent_publisher_factory(
            os.environ["TEST_BOOTSTRAP"], client_id="held", executor=executor
        )
        relay = OutboxRelay(
            pool,
            outbox_schema(),
            publishers,
            owner="held-probe",
            config=OutboxRelayConfig(lease_seconds=5, poll_interval_seconds=0.2),
        )
        tasks = [asyncio.create_task(relay.run(stop)), asyncio.create_task(consume(consumer, arrived, stop))]
        held = await pool.acquire()
        transaction = held.transaction()
        await transaction.start()
        await outbox.enqueue(held, message(topic, HELD_KEY, "held:1"))
        opened = time.monotonic()
        n = 0
        while time.monotonic() - opened < hold:
            key = same if n % 2 == 0 else other
            value = f"{key.decode()}:{n}"
            async with pool.acquire() as conn, conn.transaction():
                await outbox.enqueue(conn, message(topic, key, value))
            enqueued[value] = (key.decode(), time.monotonic())
            n += 1
            await asyncio.sleep(PROBE_INTERVAL_SECONDS)
        await transaction.commit()
        committed = time.monotonic()
        await pool.release(held)
        deadline = time.monotonic() + ARRIVAL_TIMEOUT_SECONDS
        while time.monotonic() < deadline and ("held:1" not in arrived or len(arrived) < len(enqueued) + 1):  # noqa: ASYNC110
            await asyncio.sleep(0.1)  # the consumer task fills `arrived`
        stop.set()
        await asyncio.gather(*tasks)
    await consumer.stop()
    await pool.close()
    result = {
        "opened": opened,
        "committed": committed,
        "held_arrived": arrived.get("held:1"),
        "same_shard_key": same.decode(),
        "rows": [
            {"value": value, "key": key, "enqueued": at, "arrived": arrived.get(value)}
            for value, (key, at) in enqueued.items()
        ],
    }
    write_result(result_file, result)


def write_result(path: Path, result: dict[str, object]) -> None:
    path.write_text(json.dumps(result))


def outbox_schema() -> Identifier:
    return Identifier(os.environ["TEST_SCHEMA"])


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
