from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict

import asyncpg
import pytest

from tests.conftest import MigratedSchema, Stack
from tests.integration.platform.kafka_helpers import producer_factory, read_topic
from yovision_platform.errors import OutboxError
from yovision_platform.outbox import MAX_MESSAGE_BYTES, Outbox, OutboxMessage
from yovision_platform.relay import OutboxRelay, RelayConfig


def message(topic: str, key: str, seq: int) -> OutboxMessage:
    return OutboxMessage(
        event_id=uuid.uuid4(),
        event_type="TestEvent",
        topic=topic,
        key=key.encode(),
        value=f"{key}:{seq}".encode(),
        headers=[("event_type", "TestEvent")],
    )


async def enqueue(pool: asyncpg.Pool, outbox: Outbox, messages: list[OutboxMessage]) -> None:
    async with pool.acquire() as conn, conn.transaction():
        for m in messages:
            await outbox.enqueue(conn, m)


async def drain(relay: OutboxRelay) -> int:
    published = 0
    while True:
        result = await relay.run_once()
        published += result.published
        if result.claimed == 0:
            return published


async def test_a_rolled_back_transaction_never_publishes(
    stack: Stack, runtime_pool: asyncpg.Pool, migrated: MigratedSchema, topic: str
) -> None:
    outbox = Outbox(migrated.name)

    async def write_then_fail() -> None:
        async with runtime_pool.acquire() as conn, conn.transaction():
            await outbox.enqueue(conn, message(topic, "k", 1))
            raise RuntimeError("business rule failed after the outbox write")

    with pytest.raises(RuntimeError):
        await write_then_fail()
    await enqueue(runtime_pool, outbox, [message(topic, "k", 2)])
    relay = OutboxRelay(runtime_pool, migrated.name, producer_factory(stack.kafka_bootstrap), owner="r1")
    try:
        assert await drain(relay) == 1
    finally:
        await relay.close()
    records = await read_topic(stack.kafka_bootstrap, topic, expected=1, timeout_seconds=5)
    assert [r.value for r in records] == [b"k:2"]


async def test_enqueue_outside_a_transaction_is_refused(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    async with runtime_pool.acquire() as conn:
        with pytest.raises(OutboxError) as caught:
            await Outbox(migrated.name).enqueue(conn, message("t", "k", 1))
    assert caught.value.code == "outbox_outside_transaction"


@pytest.mark.parametrize(("extra", "accepted"), [(-1, True), (0, True), (1, False)])
async def test_message_size_limit_boundary(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema, extra: int, accepted: bool
) -> None:
    base = message("t", "k", 1)
    overhead = base.size_bytes - len(base.value)
    sized = OutboxMessage(
        base.event_id,
        base.event_type,
        base.topic,
        base.key,
        b"x" * (MAX_MESSAGE_BYTES - overhead + extra),
        base.headers,
    )
    assert sized.size_bytes == MAX_MESSAGE_BYTES + extra
    async with runtime_pool.acquire() as conn, conn.transaction():
        if accepted:
            await Outbox(migrated.name).enqueue(conn, sized)
        else:
            with pytest.raises(OutboxError) as caught:
                await Outbox(migrated.name).enqueue(conn, sized)
            assert caught.value.code == "message_too_large"


async def test_two_relays_preserve_per_key_order(
    stack: Stack, runtime_pool: asyncpg.Pool, migrated: MigratedSchema, topic: str
) -> None:
    outbox = Outbox(migrated.name)
    keys = [f"device-{i}" for i in range(100)]
    expected: dict[bytes, list[bytes]] = defaultdict(list)
    for seq in range(6):
        batch = [message(topic, key, seq) for key in keys]
        await enqueue(runtime_pool, outbox, batch)
        for m in batch:
            expected[m.key].append(m.value)
    config = RelayConfig(batch_size=37)
    relays = [
        OutboxRelay(
            runtime_pool,
            migrated.name,
            producer_factory(stack.kafka_bootstrap, f"r{i}"),
            owner=f"relay-{i}",
            config=config,
        )
        for i in range(2)
    ]
    try:
        counts = await asyncio.gather(*(drain(r) for r in relays))
    finally:
        for relay in relays:
            await relay.close()
    assert sum(counts) == 600
    records = await read_topic(stack.kafka_bootstrap, topic, expected=600)
    seen: dict[bytes, list[bytes]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert record.key is not None and record.value is not None
        seen[record.key].append(record.value)
    assert seen == expected


async def test_a_relay_never_claims_past_a_key_held_by_another(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    outbox = Outbox(migrated.name)
    await enqueue(
        runtime_pool,
        outbox,
        [message("t", "k1", 1), message("t", "k2", 1), message("t", "k1", 2), message("t", "k3", 1)],
    )
    first = OutboxRelay(
        runtime_pool, migrated.name, producer_factory("unused"), owner="a", config=RelayConfig(batch_size=2)
    )
    second = OutboxRelay(
        runtime_pool, migrated.name, producer_factory("unused"), owner="b", config=RelayConfig(batch_size=10)
    )
    assert [bytes(r["value"]) for r in await first._claim()] == [b"k1:1", b"k2:1"]
    assert [bytes(r["value"]) for r in await second._claim()] == [b"k3:1"], "k1:2 waits behind k1:1"


async def test_a_late_committing_row_is_not_skipped(
    stack: Stack, runtime_pool: asyncpg.Pool, migrated: MigratedSchema, topic: str
) -> None:
    outbox = Outbox(migrated.name)
    relay = OutboxRelay(runtime_pool, migrated.name, producer_factory(stack.kafka_bootstrap), owner="r1")
    slow = await runtime_pool.acquire()
    try:
        transaction = slow.transaction()
        await transaction.start()
        await outbox.enqueue(slow, message(topic, "slow", 1))  # lower id, commits last
        await enqueue(runtime_pool, outbox, [message(topic, "fast", 1)])
        assert await drain(relay) == 1
        await transaction.commit()
        assert await drain(relay) == 1
    finally:
        await runtime_pool.release(slow)
        await relay.close()
    records = await read_topic(stack.kafka_bootstrap, topic, expected=2)
    assert sorted(r.value for r in records) == [b"fast:1", b"slow:1"]


async def test_a_second_writer_of_the_same_key_waits_for_the_first_to_commit(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    outbox = Outbox(migrated.name)
    first = await runtime_pool.acquire()
    try:
        transaction = first.transaction()
        await transaction.start()
        await outbox.enqueue(first, message("t", "same", 1))
        second = asyncio.create_task(enqueue(runtime_pool, outbox, [message("t", "same", 2)]))
        await asyncio.sleep(0.3)
        assert not second.done(), "same-key writer must wait so ids follow commit order"
        await transaction.commit()
        await asyncio.wait_for(second, 5)
    finally:
        await runtime_pool.release(first)
    values = await runtime_pool.fetch(f'SELECT value FROM "{migrated.name}".outbox ORDER BY id')
    assert [bytes(r["value"]) for r in values] == [b"same:1", b"same:2"]


async def test_broker_down_keeps_rows_with_backoff_and_a_stable_code(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    outbox = Outbox(migrated.name)
    await enqueue(runtime_pool, outbox, [message("t", "k", 1), message("t", "k", 2)])
    unreachable = producer_factory("127.0.0.1:1")
    relay = OutboxRelay(
        runtime_pool, migrated.name, unreachable, owner="r1", config=RelayConfig(lease_seconds=8)
    )
    try:
        result = await relay.run_once()
    finally:
        await relay.close()
    assert (result.claimed, result.published, result.failed) == (2, 0, 1)
    rows = await runtime_pool.fetch(
        f"""SELECT attempts, last_error_code, published_at, lease_owner,
                   next_attempt_at > now() AS backing_off
              FROM "{migrated.name}".outbox ORDER BY id"""
    )
    first, second = (dict(r) for r in rows)
    assert first == {
        "attempts": 1,
        "last_error_code": "broker_unavailable",
        "published_at": None,
        "lease_owner": None,
        "backing_off": True,
    }
    assert second["attempts"] == 0 and second["lease_owner"] is None and second["published_at"] is None
    relay_again = OutboxRelay(runtime_pool, migrated.name, unreachable, owner="r2")
    try:
        assert (await relay_again.run_once()).claimed == 0, "the key waits behind its backing-off first row"
    finally:
        await relay_again.close()


async def test_pruning_removes_only_rows_published_before_the_retention(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    outbox = Outbox(migrated.name)
    await enqueue(runtime_pool, outbox, [message("t", f"k{i}", 1) for i in range(4)])
    table = f'"{migrated.name}".outbox'
    await runtime_pool.execute(
        f"UPDATE {table} SET published_at = now() - interval '8 days' WHERE value IN ('k0:1', 'k1:1')"
    )
    await runtime_pool.execute(
        f"UPDATE {table} SET published_at = now() - interval '6 days' WHERE value = 'k2:1'"
    )
    relay = OutboxRelay(
        runtime_pool,
        migrated.name,
        producer_factory("unused"),
        owner="r",
        config=RelayConfig(published_retention_seconds=7 * 24 * 3600),
    )
    assert await relay.prune_published(batch_rows=1) == 1
    assert await relay.prune_published() == 1
    assert await relay.prune_published() == 0
    left = await runtime_pool.fetch(f"SELECT value FROM {table} ORDER BY id")
    assert [bytes(r["value"]) for r in left] == [b"k2:1", b"k3:1"], "recent and unpublished rows stay"
    assert await relay.refresh_backlog() == 1
