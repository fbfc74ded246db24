from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence

import asyncpg
import pytest

from tests.support.kafka import drained, publishers, read_topic, running, wait_until
from tests.support.stack import MigratedSchema, Stack
from yovision_platform.errors import OutboxError
from yovision_platform.messaging import (
    MAX_MESSAGE_BYTES,
    OUTBOX_SHARDS,
    CursorFenced,
    Outbox,
    OutboxMessage,
    OutboxRelay,
    OutboxRelayConfig,
    PublisherFactory,
    PublishError,
    PublishFailed,
    ShardCursors,
    TransactionalPublisher,
    WindowPosition,
    notify_channel,
    partition_for_key,
)
from yovision_platform.storage import DbConnection, Identifier, PostgresUnitOfWork

FAST = OutboxRelayConfig(lease_seconds=3, poll_interval_seconds=0.1)


def message(topic: str, key: str, seq: int) -> OutboxMessage:
    return OutboxMessage(
        event_id=uuid.uuid4(),
        event_type="TestEvent",
        topic=topic,
        key=key.encode(),
        value=f"{key}:{seq}".encode(),
        headers=[("event_type", "TestEvent")],
    )


async def enqueue(pool: asyncpg.Pool, outbox: Outbox, messages: Sequence[OutboxMessage]) -> None:
    async with pool.acquire() as conn, conn.transaction():
        for m in messages:
            await outbox.enqueue(conn, m)


def values_by_key(records: Sequence[object]) -> dict[bytes, list[bytes]]:
    seen: dict[bytes, list[bytes]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):  # type: ignore[attr-defined]
        seen[record.key].append(record.value)  # type: ignore[attr-defined]
    return seen


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
    with publishers(stack.kafka_bootstrap) as factory:
        relay = OutboxRelay(runtime_pool, migrated.name, factory, owner="r1", config=FAST)
        async with running(relay):
            await drained(relay)
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


async def test_each_row_is_in_the_shard_of_its_key_and_sql_computes_the_same_shard(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    keys = [f"device-{i:04d}".encode() for i in range(300)] + [b"", b"a", b"ab", b"abc", bytes(range(256))]
    await enqueue(runtime_pool, Outbox(migrated.name), [message("t", k.hex(), 1) for k in keys[:50]])
    rows = await runtime_pool.fetch(f'SELECT message_key, shard FROM "{migrated.name}".outbox')
    assert {bytes(r["message_key"]): r["shard"] for r in rows} == {
        k.hex().encode(): partition_for_key(k.hex().encode(), OUTBOX_SHARDS) for k in keys[:50]
    }
    in_sql = await runtime_pool.fetch(
        f'SELECT k, "{migrated.name}".outbox_key_shard(k, $2) AS shard FROM unnest($1::bytea[]) AS k',
        keys,
        OUTBOX_SHARDS,
    )
    assert [r["shard"] for r in in_sql] == [partition_for_key(k, OUTBOX_SHARDS) for k in keys]


class _Wrapped:
    """A publisher passing every call to `inner`; subclasses change `commit`."""

    def __init__(self, inner: TransactionalPublisher) -> None:
        self._inner = inner

    async def start(self) -> None:
        await self._inner.start()

    def begin(self) -> None:
        self._inner.begin()

    def send(self, topic: str, value: bytes, key: bytes, headers: Sequence[tuple[str, str | bytes]]) -> None:
        self._inner.send(topic, value, key, headers)

    async def commit(self) -> None:
        await self._inner.commit()

    async def abort(self) -> None:
        await self._inner.abort()

    async def close(self) -> None:
        await self._inner.close()


class RecordingPublishers:
    """Wraps a publisher factory to record, per transactional id, who committed when."""

    def __init__(self, inner: PublisherFactory) -> None:
        self.inner = inner
        self.commits: list[tuple[str, str, float, float]] = []  # (txn id, owner, begin, committed)

    def factory(self, owner: str) -> PublisherFactory:
        def make(transactional_id: str) -> TransactionalPublisher:
            return _Recording(self, owner, transactional_id, self.inner(transactional_id))

        return make


class _Recording(_Wrapped):
    def __init__(
        self, log: RecordingPublishers, owner: str, txn_id: str, inner: TransactionalPublisher
    ) -> None:
        super().__init__(inner)
        self._log, self._owner, self._txn_id = log, owner, txn_id
        self._began = 0.0

    def begin(self) -> None:
        self._began = time.monotonic()
        self._inner.begin()

    async def commit(self) -> None:
        await self._inner.commit()
        self._log.commits.append((self._txn_id, self._owner, self._began, time.monotonic()))


async def test_two_relays_split_the_shards_never_publish_one_at_once_and_keep_per_key_order(
    stack: Stack, runtime_pool: asyncpg.Pool, migrated: MigratedSchema, topic: str
) -> None:
    outbox = Outbox(migrated.name)
    keys = [f"device-{i}" for i in range(100)]
    expected: dict[bytes, list[bytes]] = defaultdict(list)
    with publishers(stack.kafka_bootstrap) as inner:
        recording = RecordingPublishers(inner)
        config = OutboxRelayConfig(batch_size=37, lease_seconds=3, poll_interval_seconds=0.1)
        first = OutboxRelay(
            runtime_pool, migrated.name, recording.factory("a"), owner="relay-a", config=config
        )
        second = OutboxRelay(
            runtime_pool, migrated.name, recording.factory("b"), owner="relay-b", config=config
        )
        async with running(first, second):
            for seq in range(6):
                batch = [message(topic, key, seq) for key in keys]
                await enqueue(runtime_pool, outbox, batch)
                for m in batch:
                    expected[m.key].append(m.value)

            async def split() -> bool:
                return len(first.held_shards()) == len(second.held_shards()) == OUTBOX_SHARDS // 2

            await wait_until(split)
            assert first.held_shards().isdisjoint(second.held_shards())
            await drained(first)
    records = await read_topic(stack.kafka_bootstrap, topic, expected=600)
    assert values_by_key(records) == expected
    assert len(records) == 600
    by_txn: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    for txn_id, owner, began, committed in recording.commits:
        by_txn[txn_id].append((owner, began, committed))
    for commits in by_txn.values():
        commits.sort(key=lambda c: c[1])
        for (owner, _, committed), (next_owner, next_began, _) in itertools.pairwise(commits):
            assert owner == next_owner or committed <= next_began, "two relays published one shard at once"


async def test_a_late_committing_row_is_published_not_skipped(
    stack: Stack, runtime_pool: asyncpg.Pool, migrated: MigratedSchema, topic: str
) -> None:
    outbox = Outbox(migrated.name)
    slow = await runtime_pool.acquire()
    try:
        transaction = slow.transaction()
        await transaction.start()
        await outbox.enqueue(slow, message(topic, "slow", 1))  # lower id, commits last
        with publishers(stack.kafka_bootstrap) as factory:
            relay = OutboxRelay(runtime_pool, migrated.name, factory, owner="r1", config=FAST)
            async with running(relay):
                await enqueue(runtime_pool, outbox, [message(topic, "fast", 1)])
                fast = await read_topic(stack.kafka_bootstrap, topic, expected=1, timeout_seconds=15)
                assert [r.value for r in fast] == [b"fast:1"]
                await transaction.commit()
                await drained(relay)
    finally:
        await runtime_pool.release(slow)
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


async def test_broker_down_backs_the_shard_off_with_a_stable_code_and_the_key_waits(
    stack: Stack, runtime_pool: asyncpg.Pool, migrated: MigratedSchema, topic: str
) -> None:
    outbox = Outbox(migrated.name)
    await enqueue(runtime_pool, outbox, [message(topic, "k", 1), message(topic, "k", 2)])
    shard = partition_for_key(b"k", OUTBOX_SHARDS)
    cursor_sql = f"""SELECT attempts, last_error_code, next_attempt_at > now() AS backing_off,
                            cur_snapshot::text = prev_snapshot::text AND last_id = 0 AS unmoved
                       FROM "{migrated.name}".outbox_cursors WHERE outbox = 'outbox' AND shard = $1"""
    with publishers("127.0.0.1:1", call_timeout_seconds=1.0) as unreachable:
        relay = OutboxRelay(runtime_pool, migrated.name, unreachable, owner="r1", config=FAST)
        async with running(relay):

            async def backing_off() -> bool:
                row = await runtime_pool.fetchrow(cursor_sql, shard)
                return row is not None and row["attempts"] >= 1

            await wait_until(backing_off)
            row = dict(await runtime_pool.fetchrow(cursor_sql, shard))
    assert row == {
        "attempts": row["attempts"],
        "last_error_code": "broker_unavailable",
        "backing_off": True,
        "unmoved": True,
    }
    assert await relay.backlog() == 2, "the key's rows wait"
    with publishers(stack.kafka_bootstrap) as factory:
        relay = OutboxRelay(runtime_pool, migrated.name, factory, owner="r2", config=FAST)
        async with running(relay):
            await drained(relay)
    records = await read_topic(stack.kafka_bootstrap, topic, expected=2)
    assert [r.value for r in records] == [b"k:1", b"k:2"]
    after = await runtime_pool.fetchrow(cursor_sql, shard)
    assert (after["attempts"], after["last_error_code"]) == (0, None)


async def test_pruning_removes_only_old_rows_their_cursor_has_passed(
    stack: Stack,
    runtime_pool: asyncpg.Pool,
    migrated: MigratedSchema,
    admin_conn: asyncpg.Connection,
    topic: str,
) -> None:
    outbox = Outbox(migrated.name)
    await enqueue(runtime_pool, outbox, [message(topic, f"k{i}", 1) for i in range(3)])
    table = f'"{migrated.name}".outbox'
    with publishers(stack.kafka_bootstrap) as factory:
        relay = OutboxRelay(runtime_pool, migrated.name, factory, owner="r", config=FAST)
        async with running(relay):
            await drained(relay)
    await enqueue(runtime_pool, outbox, [message(topic, "k9", 1)])  # not relayed: its cursor is before it
    await admin_conn.execute(
        f"UPDATE {table} SET created_at = now() - interval '8 days' WHERE value IN ('k0:1', 'k1:1', 'k9:1')"
    )
    await admin_conn.execute(
        f"UPDATE {table} SET created_at = now() - interval '6 days' WHERE value = 'k2:1'"
    )
    pruner = OutboxRelay(runtime_pool, migrated.name, factory, owner="p", config=OutboxRelayConfig())
    assert await pruner.prune_published(batch_rows=1) == 1
    assert await pruner.prune_published() == 1
    assert await pruner.prune_published() == 0
    left = await runtime_pool.fetch(f"SELECT value FROM {table} ORDER BY id")
    assert [bytes(r["value"]) for r in left] == [b"k2:1", b"k9:1"], "recent and unrelayed rows stay"
    assert await pruner.backlog() == 1


async def test_a_relay_whose_shard_was_taken_over_cannot_advance_renew_or_back_off(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    paused = ShardCursors(migrated.name, "outbox", "relay-a", lease_seconds=1.0)
    successor = ShardCursors(migrated.name, "outbox", "relay-b", lease_seconds=30.0)
    async with runtime_pool.acquire() as conn:
        (held,) = await paused.acquire(conn, [0])
        assert await successor.acquire(conn, [0]) == [], "a held shard is not taken"

        async def expired() -> bool:
            return bool(
                await conn.fetchval(
                    f"""SELECT lease_expires_at <= now() FROM "{migrated.name}".outbox_cursors
                         WHERE outbox = 'outbox' AND shard = 0"""
                )
            )

        await wait_until(expired, timeout_seconds=10)
        (taken,) = await successor.acquire(conn, [0])
        assert taken.epoch == held.epoch + 1 and taken.position == held.position
        moved = WindowPosition(held.position.cur, held.position.cur, 0)
        with pytest.raises(CursorFenced):
            await paused.advance(conn, 0, held.epoch, moved)
        with pytest.raises(CursorFenced):
            await paused.record_failure(conn, 0, held.epoch, "timeout", base_seconds=1, cap_seconds=30)
        assert await paused.renew(conn, {0: held.epoch}) == {}
        await paused.release(conn, 0, held.epoch)  # a no-op: the shard is the successor's
        row = await conn.fetchrow(
            f"""SELECT owner, epoch, attempts FROM "{migrated.name}".outbox_cursors
                 WHERE outbox = 'outbox' AND shard = 0"""
        )
        assert dict(row) == {"owner": "relay-b", "epoch": taken.epoch, "attempts": 0}


async def test_many_messages_in_one_round_trip_keep_their_order_shard_and_ids(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    messages = [message("t", f"key-{n % 7}", n) for n in range(50)]
    async with runtime_pool.acquire() as conn, conn.transaction():
        ids = await Outbox(migrated.name).enqueue_many(conn, messages)
    rows = await runtime_pool.fetch(f'SELECT id, value, shard FROM "{migrated.name}".outbox ORDER BY id')
    assert [r["id"] for r in rows] == ids
    assert [bytes(r["value"]) for r in rows] == [m.value for m in messages]
    assert [r["shard"] for r in rows] == [partition_for_key(m.key, OUTBOX_SHARDS) for m in messages]


async def test_enqueue_many_outside_a_transaction_is_refused(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    async with runtime_pool.acquire() as conn:
        with pytest.raises(OutboxError) as caught:
            await Outbox(migrated.name).enqueue_many(conn, [message("t", "k", 1)])
    assert caught.value.code == "outbox_outside_transaction"


async def test_a_writer_of_many_holds_each_of_its_keys_until_it_commits(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    outbox = Outbox(migrated.name)
    first = await runtime_pool.acquire()
    try:
        transaction = first.transaction()
        await transaction.start()
        await outbox.enqueue_many(first, [message("t", "a", 1), message("t", "b", 1)])
        second = asyncio.create_task(enqueue(runtime_pool, outbox, [message("t", "b", 2)]))

        async def second_waits_on_a_key_lock() -> bool:
            return bool(
                await first.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                )
            )

        await wait_until(second_waits_on_a_key_lock, timeout_seconds=10)
        assert not second.done()
        await transaction.commit()
        await asyncio.wait_for(second, 5)
    finally:
        await runtime_pool.release(first)
    values = await runtime_pool.fetch(f'SELECT value FROM "{migrated.name}".outbox ORDER BY id')
    assert [bytes(r["value"]) for r in values] == [b"a:1", b"b:1", b"b:2"]


@contextlib.asynccontextmanager
async def wake_ups(pool: asyncpg.Pool, schema: Identifier) -> AsyncIterator[list[str]]:
    """The payloads of the outbox channel's notifications, as they arrive."""
    heard: list[str] = []
    listener = await pool.acquire()
    try:
        await listener.add_listener(notify_channel(schema), lambda *args: heard.append(args[3]))
        yield heard
    finally:
        await listener.reset()
        await pool.release(listener)


async def hear_every_shard(heard: list[str], shards: set[int]) -> None:
    async def all_heard() -> bool:
        return len(heard) >= len(shards)

    await wait_until(all_heard, timeout_seconds=10)


async def test_many_messages_wake_the_publisher_of_each_of_their_shards_once_at_commit(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    messages = [message("t", f"key-{n}", n) for n in range(40)]
    shards = {partition_for_key(m.key, OUTBOX_SHARDS) for m in messages}
    async with wake_ups(runtime_pool, migrated.name) as heard:
        async with runtime_pool.acquire() as conn, conn.transaction():
            await Outbox(migrated.name).enqueue_many(conn, messages)
            assert heard == []  # delivered at commit, not before
        await hear_every_shard(heard, shards)
    assert sorted(heard) == sorted(str(s) for s in shards)


async def test_a_unit_of_work_wakes_the_publishers_after_its_commit_not_from_inside_it(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NOTIFY inside a transaction holds PostgreSQL's database-wide notify lock through the commit's flush,
    so the unit of work's transaction sends none; its wake-up follows the commit, one per shard, and a
    rolled-back unit of work sends none."""

    def messages() -> list[OutboxMessage]:
        return [message("t", f"key-{n}", n) for n in range(40)]

    shards = {partition_for_key(m.key, OUTBOX_SHARDS) for m in messages()}
    async with wake_ups(runtime_pool, migrated.name) as heard:
        async with runtime_pool.acquire() as conn:
            async with conn.transaction():
                await Outbox(migrated.name).enqueue_many(conn, messages(), notify=False)
            await conn.execute("SELECT pg_notify($1, 'after')", notify_channel(migrated.name))

        async def heard_after() -> bool:
            return "after" in heard

        await wait_until(heard_after, timeout_seconds=10)
        assert heard == ["after"], "the transaction itself notified"
        heard.clear()
        notify_flags: list[bool] = []
        enqueue_many = Outbox.enqueue_many

        async def noted(
            outbox: Outbox, conn: DbConnection, batch: Sequence[OutboxMessage], *, notify: bool = True
        ) -> list[int]:
            notify_flags.append(notify)
            return await enqueue_many(outbox, conn, batch, notify=notify)

        monkeypatch.setattr(Outbox, "enqueue_many", noted)

        async def failing_use_case() -> None:
            async with PostgresUnitOfWork(runtime_pool, migrated.name) as uow:
                await uow.outbox.enqueue_many(messages())
                raise RuntimeError("the use case failed")

        with pytest.raises(RuntimeError):
            await failing_use_case()
        async with PostgresUnitOfWork(runtime_pool, migrated.name) as uow:
            await uow.outbox.enqueue_many(messages())
            await uow.outbox.enqueue(message("t", "key-0", 99))
        await hear_every_shard(heard, shards)
    assert notify_flags == [False, False, False]
    assert sorted(heard) == sorted(str(s) for s in shards)


class _HeldCommit(_Wrapped):
    """A publisher whose first commit waits for `release`: the window in which a new row commits while
    the relay's prefetch is already under way."""

    def __init__(self, inner: TransactionalPublisher, held: asyncio.Event, release: asyncio.Event) -> None:
        super().__init__(inner)
        self._held, self._release = held, release

    async def commit(self) -> None:
        if not self._held.is_set():
            self._held.set()
            await self._release.wait()
        await self._inner.commit()


async def test_a_row_committed_during_a_kafka_commit_is_published_at_once_not_after_the_poll(
    stack: Stack, runtime_pool: asyncpg.Pool, migrated: MigratedSchema, topic: str
) -> None:
    """A row committed while the relay's Kafka commit is in flight wakes it (NOTIFY) and goes out as soon
    as that commit is done, not after the poll interval (30 s here): no read taken before it, empty, may send
    the relay to sleep."""
    outbox = Outbox(migrated.name)
    key = "one-key"  # one shard: the held commit and the later row are the same shard's
    held, release = asyncio.Event(), asyncio.Event()
    slow_poll = OutboxRelayConfig(lease_seconds=3, poll_interval_seconds=30.0)
    with publishers(stack.kafka_bootstrap) as factory:

        def holding(transactional_id: str) -> TransactionalPublisher:
            return _HeldCommit(factory(transactional_id), held, release)

        relay = OutboxRelay(runtime_pool, migrated.name, holding, owner="relay-prefetch", config=slow_poll)
        async with running(relay):
            await enqueue(runtime_pool, outbox, [message(topic, key, 1)])
            await asyncio.wait_for(held.wait(), 20)  # the first batch's commit is in flight
            await enqueue(runtime_pool, outbox, [message(topic, key, 2)])
            release.set()
            started = time.monotonic()
            records = await read_topic(stack.kafka_bootstrap, topic, expected=2, timeout_seconds=10)
            waited = time.monotonic() - started
    assert [r.value for r in sorted(records, key=lambda r: r.offset)] == [b"one-key:1", b"one-key:2"]
    assert waited < 10, "the second row waited for the poll interval"


class _FailingCommits(_Wrapped):
    """A publisher whose first commits fail, each after its delay in `plan` (a call that ran out its bound,
    or one refused at once); it records when each commit began and ended."""

    def __init__(self, inner: TransactionalPublisher, plan: list[float], calls: list[tuple[float, float]]):
        super().__init__(inner)
        self._plan, self._calls = plan, calls

    async def commit(self) -> None:
        began = time.monotonic()
        try:
            if self._plan:
                await asyncio.sleep(self._plan.pop(0))
                raise PublishFailed(PublishError.TIMEOUT)
            await self._inner.commit()
        finally:
            self._calls.append((began, time.monotonic()))


async def test_the_backoff_counts_from_when_the_failed_attempt_began(
    stack: Stack, runtime_pool: asyncpg.Pool, migrated: MigratedSchema, topic: str
) -> None:
    """A commit that failed only when its bound ran out (a failover under way that long) is tried again at
    once; one refused at once waits its whole backoff (1 s, then 2 s, less up to 20% jitter)."""
    outbox = Outbox(migrated.name)
    key = "one-key"
    calls: list[tuple[float, float]] = []
    plan = [1.5, 0.0]  # longer than the first backoff (1 s), then a failure at once
    with publishers(stack.kafka_bootstrap) as factory:

        def failing(transactional_id: str) -> TransactionalPublisher:
            inner = factory(transactional_id)
            if transactional_id.endswith(f".{partition_for_key(key.encode(), OUTBOX_SHARDS)}"):
                return _FailingCommits(inner, plan, calls)
            return inner

        relay = OutboxRelay(runtime_pool, migrated.name, failing, owner="relay-backoff", config=FAST)
        async with running(relay):
            await enqueue(runtime_pool, outbox, [message(topic, key, 1)])
            records = await read_topic(stack.kafka_bootstrap, topic, expected=1, timeout_seconds=20)
    assert [r.value for r in records] == [b"one-key:1"]
    (slow_began, slow_failed), (fast_began, _), (last_began, _) = calls[:3]
    assert slow_failed - slow_began >= 1.5
    assert fast_began - slow_failed < 0.5, "a failure that took longer than its backoff is retried at once"
    assert last_began - fast_began >= 2 * 0.8, "a failure at once waits its backoff, counted from its start"


async def test_while_rows_flow_the_cursor_is_stored_at_most_once_per_interval_and_at_once_when_idle(
    stack: Stack, runtime_pool: asyncpg.Pool, migrated: MigratedSchema, topic: str
) -> None:
    """The cursor write is off the batch's path: 20 batches of one shard, published within the advance
    interval, store the cursor at most twice (the first batch, then the shard going idle), and the stored
    cursor has passed every row once the shard is idle."""
    outbox = Outbox(migrated.name)
    key = "one-key"
    config = OutboxRelayConfig(
        batch_size=10, lease_seconds=20, poll_interval_seconds=0.1, advance_interval_seconds=15
    )
    with publishers(stack.kafka_bootstrap) as factory:
        relay = OutboxRelay(runtime_pool, migrated.name, factory, owner="relay-lazy", config=config)
        stored: list[int] = []
        store = relay._cursors.advance

        async def counted(conn: DbConnection, shard: int, epoch: int, position: WindowPosition) -> float:
            stored.append(shard)
            return await store(conn, shard, epoch, position)

        relay._cursors.advance = counted  # type: ignore[method-assign]
        async with running(relay):
            await enqueue(runtime_pool, outbox, [message(topic, key, seq) for seq in range(200)])
            await drained(relay, timeout_seconds=14)
            records = await read_topic(stack.kafka_bootstrap, topic, expected=200, timeout_seconds=10)
    assert [r.value for r in sorted(records, key=lambda r: r.offset)] == [
        f"{key}:{seq}".encode() for seq in range(200)
    ]
    assert stored == [partition_for_key(key.encode(), OUTBOX_SHARDS)] * 2


async def test_a_lost_listen_connection_is_replaced_so_wake_ups_are_heard_again(
    stack: Stack,
    runtime_pool: asyncpg.Pool,
    migrated: MigratedSchema,
    topic: str,
    admin_conn: asyncpg.Connection,
) -> None:
    """PostgreSQL ends the relay's LISTEN session (a restart, a network cut): the relay listens again on a
    new connection at once, so a row committed after that goes out on its wake-up, not after the poll (30 s
    here, with wake-ups heard or not)."""
    outbox = Outbox(migrated.name)
    key = "one-key"
    slow_poll = OutboxRelayConfig(
        lease_seconds=3, poll_interval_seconds=30.0, deaf_poll_interval_seconds=30.0
    )
    listen = f'LISTEN "{notify_channel(migrated.name)}"'

    async def listening_backends() -> set[int]:
        rows = await admin_conn.fetch("SELECT pid FROM pg_stat_activity WHERE query = $1", listen)
        return {row["pid"] for row in rows}

    with publishers(stack.kafka_bootstrap) as factory:
        relay = OutboxRelay(runtime_pool, migrated.name, factory, owner="relisten", config=slow_poll)
        async with running(relay):
            await wait_until(listening_backends, timeout_seconds=10, what="the relay listening")
            [first] = await listening_backends()
            await enqueue(runtime_pool, outbox, [message(topic, key, 1)])
            await read_topic(stack.kafka_bootstrap, topic, expected=1, timeout_seconds=10)
            assert await admin_conn.fetchval("SELECT pg_terminate_backend($1)", first)

            async def listening_again() -> bool:
                return bool((await listening_backends()) - {first})

            await wait_until(listening_again, timeout_seconds=10, what="the relay listening again")
            await enqueue(runtime_pool, outbox, [message(topic, key, 2)])
            started = time.monotonic()
            records = await read_topic(stack.kafka_bootstrap, topic, expected=2, timeout_seconds=10)
            waited = time.monotonic() - started
    assert [r.value for r in sorted(records, key=lambda r: r.offset)] == [b"one-key:1", b"one-key:2"]
    assert waited < 10, "the second row waited for the poll interval"
