"""A relay in its own process, for crash tests.

    python relay_process.py SCHEMA BOOTSTRAP OWNER [HANG_ROUND MARKER]

The runtime DSN comes from the environment (TEST_RUNTIME_DSN). With HANG_ROUND, the relay publishes that
round to Kafka, writes MARKER, and hangs *before* acknowledging in the database: the moment a SIGKILL hurts
most (messages are in Kafka, the outbox still says unpublished and leased).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg

from yovision_platform.db import Identifier
from yovision_platform.kafka import start_producer
from yovision_platform.relay import OutboxRelay, PublishError, RelayConfig


class HangingRelay(OutboxRelay):
    def __init__(self, *args: Any, hang_round: int, marker: Path, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rounds = 0
        self._hang_round = hang_round
        self._marker = marker

    async def _settle(
        self, acked: Sequence[Any], failed: Sequence[Any], not_sent: Sequence[Any], error: PublishError | None
    ) -> int:
        self._rounds += 1
        if self._rounds == self._hang_round:
            self._marker.write_text(str(len(acked)))
            await asyncio.Event().wait()
        return await super()._settle(acked, failed, not_sent, error)


async def main(argv: list[str]) -> None:
    schema, bootstrap, owner = Identifier(argv[0]), argv[1], argv[2]
    pool = await asyncpg.create_pool(os.environ["TEST_RUNTIME_DSN"], min_size=1, max_size=2)
    assert pool is not None

    async def producer():  # type: ignore[no-untyped-def]
        return await start_producer(bootstrap, client_id=owner)

    config = RelayConfig(batch_size=100, lease_seconds=6)
    relay: OutboxRelay
    if len(argv) > 3:
        relay = HangingRelay(
            pool, schema, producer, owner=owner, config=config, hang_round=int(argv[3]), marker=Path(argv[4])
        )
    else:
        relay = OutboxRelay(pool, schema, producer, owner=owner, config=config)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await relay.run(stop)
    await pool.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
