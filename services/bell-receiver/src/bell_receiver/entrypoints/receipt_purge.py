"""Worker that deletes expired nonce receipts (the only receipts the runtime role may delete)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg

from bell_receiver.adapters.receipts import ReceiptStore
from yovision_platform.backoff import wait_for_stop
from yovision_platform.db import Identifier

RECEIPT_PURGE_INTERVAL_SECONDS = 60.0


def receipt_purge_worker(
    pool: asyncpg.Pool, schema: Identifier, interval_seconds: float = RECEIPT_PURGE_INTERVAL_SECONDS
) -> Callable[[asyncio.Event], Awaitable[None]]:
    store = ReceiptStore(schema)

    async def run(stop: asyncio.Event) -> None:
        while not stop.is_set():
            async with pool.acquire() as conn:
                await store.purge_expired(conn)
            await wait_for_stop(stop, interval_seconds)

    return run
