"""A relay in its own process, for crash and handover tests.

    python relay_process.py SCHEMA BOOTSTRAP OWNER [--batch-size B]
        [--hang-after-commit N MARKER] [--stop-before-commit N MARKER]

The runtime DSN comes from the environment (TEST_RUNTIME_DSN); the lease is TEST_LEASE_SECONDS (default 6).

- ``--hang-after-commit N MARKER``: the N-th batch is committed to Kafka, MARKER gets the batch's row count,
  and the shard hangs *before* its cursor update: the moment a SIGKILL hurts most (the messages are in
  Kafka, the cursor still stands before them).
- ``--stop-before-commit N MARKER``: the N-th batch is produced in its transaction, MARKER gets the row
  count, and the process SIGSTOPs itself before the commit. After SIGCONT the commit runs; MARKER then gets
  ``committed`` or the refusal's reason (``producer_fenced`` when a successor took the shard over).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg

from yovision_platform.messaging import (
    OutboxRelay,
    OutboxRelayConfig,
    PublisherFactory,
    PublishFailed,
    TransactionalPublisher,
    confluent_publisher_factory,
)
from yovision_platform.storage import Identifier


def mark(marker: Path, text: str) -> None:
    marker.write_text(text)


class HookedPublisher:
    """BenchCounts commits of one process's publishers and acts on the N-th."""

    commits = 0

    def __init__(self, inner: TransactionalPublisher, args: argparse.Namespace) -> None:
        self._inner = inner
        self._args = args
        self._sent = 0

    async def start(self) -> None:
        await self._inner.start()

    def begin(self) -> None:
        self._sent = 0
        self._inner.begin()

    def send(self, topic: str, value: bytes, key: bytes, headers: list[tuple[str, str | bytes]]) -> None:
        self._sent += 1
        self._inner.send(topic, value, key, headers)

    async def commit(self) -> None:
        HookedPublisher.commits += 1
        number = HookedPublisher.commits
        if self._args.stop_before_commit and number == int(self._args.stop_before_commit[0]):
            marker = Path(self._args.stop_before_commit[1])
            mark(marker, str(self._sent))
            os.kill(os.getpid(), signal.SIGSTOP)
            try:
                await self._inner.commit()
            except PublishFailed as refused:
                mark(marker, refused.reason.value)
                raise
            mark(marker, "committed")
            return
        await self._inner.commit()
        if self._args.hang_after_commit and number == int(self._args.hang_after_commit[0]):
            mark(Path(self._args.hang_after_commit[1]), str(self._sent))
            await asyncio.Event().wait()

    async def abort(self) -> None:
        await self._inner.abort()

    async def close(self) -> None:
        await self._inner.close()


def hooked(inner: PublisherFactory, args: argparse.Namespace) -> PublisherFactory:
    def factory(transactional_id: str) -> TransactionalPublisher:
        return HookedPublisher(inner(transactional_id), args)

    return factory


async def main(args: argparse.Namespace) -> None:
    pool = await asyncpg.create_pool(os.environ["TEST_RUNTIME_DSN"], min_size=1, max_size=8)
    assert pool is not None
    config = OutboxRelayConfig(
        batch_size=args.batch_size,
        lease_seconds=float(os.environ.get("TEST_LEASE_SECONDS", "6")),
        poll_interval_seconds=0.1,
    )
    with ThreadPoolExecutor(max_workers=8) as executor:
        publishers = confluent_publisher_factory(args.bootstrap, client_id=args.owner, executor=executor)
        relay = OutboxRelay(
            pool, Identifier(args.schema), hooked(publishers, args), owner=args.owner, config=config
        )
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await relay.run(stop)
    await pool.close()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("schema")
    parser.add_argument("bootstrap")
    parser.add_argument("owner")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--hang-after-commit", nargs=2, metavar=("N", "MARKER"))
    parser.add_argument("--stop-before-commit", nargs=2, metavar=("N", "MARKER"))
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
