"""A shard handover under load: relay A is SIGSTOPped with a batch produced in its open Kafka transaction,
relay B takes A's shards over after the lease, A is resumed. A read_committed consumer then sees every
event, each key in its enqueue order, and A's resumed commit is refused (fenced by B at the broker)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path

import asyncpg

from tests.support.kafka import read_topic, wait_until
from tests.support.stack import REPO_ROOT, MigratedSchema, Stack
from yovision_platform.messaging import (
    OUTBOX_SHARDS,
    Outbox,
    OutboxMessage,
    OutboxRelay,
    TransactionalPublisher,
)

RELAY_SCRIPT = Path(__file__).with_name("relay_process.py")
MIN_EVENTS = 1500
KEYS = 40
ROWS_PER_TRANSACTION = 10
LEASE_SECONDS = "3"


def start_relay(migrated: MigratedSchema, stack: Stack, owner: str, *hook: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TEST_RUNTIME_DSN": migrated.runtime_dsn, "TEST_LEASE_SECONDS": LEASE_SECONDS}
    return subprocess.Popen(
        [
            sys.executable,
            str(RELAY_SCRIPT),
            migrated.name,
            stack.kafka_bootstrap,
            owner,
            "--batch-size",
            "50",
            *hook,
        ],
        env=env,
        cwd=REPO_ROOT,
    )


def marked(marker: Path) -> str:
    return marker.read_text() if marker.exists() else ""


def no_publisher(transactional_id: str) -> TransactionalPublisher:
    raise AssertionError("the observer only reads the backlog")


async def test_a_sigstopped_relay_hands_its_shards_over_without_loss_or_reordering(
    stack: Stack, runtime_pool: asyncpg.Pool, migrated: MigratedSchema, topic: str, tmp_path: Path
) -> None:
    outbox = Outbox(migrated.name)
    marker = tmp_path / "stopped"
    sent: dict[bytes, list[bytes]] = defaultdict(list)

    resumed = asyncio.Event()
    written = 0

    async def write() -> None:
        nonlocal written
        while written < MIN_EVENTS or not resumed.is_set():
            first, written = written, written + ROWS_PER_TRANSACTION
            batch = [
                OutboxMessage(uuid.uuid4(), "TestEvent", topic, f"key-{n % KEYS}".encode(), f"{n}".encode())
                for n in range(first, first + ROWS_PER_TRANSACTION)
            ]
            batch.sort(key=lambda m: m.key)  # stable: a key's rows keep their order
            async with runtime_pool.acquire() as conn, conn.transaction():
                for m in batch:
                    await outbox.enqueue(conn, m)
            for m in batch:
                sent[m.key].append(m.value)
            await asyncio.sleep(0.02)

    paused = start_relay(migrated, stack, "relay-a", "--stop-before-commit", "3", str(marker))
    successor = start_relay(migrated, stack, "relay-b")
    observer = OutboxRelay(runtime_pool, migrated.name, no_publisher, owner="observer")
    cursors = f'"{migrated.name}".outbox_cursors'
    try:
        writer = asyncio.create_task(write())

        async def stopped() -> bool:
            return marked(marker).isdigit() and paused.poll() is None

        await wait_until(stopped, timeout_seconds=60)

        async def b_holds_everything() -> bool:
            owners = await runtime_pool.fetch(
                f"SELECT owner FROM {cursors} WHERE outbox = 'outbox' AND lease_expires_at > now()"
            )
            return [r["owner"] for r in owners] == ["relay-b"] * OUTBOX_SHARDS

        await wait_until(b_holds_everything, timeout_seconds=60)
        taken_at = await runtime_pool.fetchval("SELECT now()")

        async def b_published_on_every_shard() -> bool:
            # B's first transaction on a shard follows its init_transactions, which fenced A's producer.
            moved = await runtime_pool.fetchval(
                f"SELECT bool_and(advanced_at > $1) FROM {cursors} WHERE outbox = 'outbox'", taken_at
            )
            return bool(moved)

        await wait_until(b_published_on_every_shard, timeout_seconds=60)
        paused.send_signal(signal.SIGCONT)
        resumed.set()

        async def refused() -> bool:
            return not marked(marker).isdigit()

        await wait_until(refused, timeout_seconds=60)
        assert marked(marker) == "producer_fenced", "the paused relay's commit must be refused"
        await writer

        async def drained() -> bool:
            return await observer.backlog() == 0

        await wait_until(drained, timeout_seconds=120)
    finally:
        for process in (paused, successor):
            process.send_signal(signal.SIGCONT)
            process.send_signal(signal.SIGTERM)
        for process in (paused, successor):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    records = await read_topic(stack.kafka_bootstrap, topic, expected=written, timeout_seconds=60)
    first_seen: dict[bytes, list[bytes]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert record.key is not None and record.value is not None
        if record.value not in first_seen[record.key]:
            first_seen[record.key].append(record.value)
    assert first_seen == sent, "no loss and every key in its enqueue order"
