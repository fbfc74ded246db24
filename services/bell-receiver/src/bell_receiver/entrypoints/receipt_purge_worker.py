"""Worker that deletes expired nonce receipts every `RECEIPT_PURGE_INTERVAL_SECONDS`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from bell_receiver.service_layer.receipt_purge import ReceiptPurger
from yovision_platform.backoff import wait_for_stop

RECEIPT_PURGE_INTERVAL_SECONDS = 60.0


def receipt_purge_worker(
    purger: ReceiptPurger, interval_seconds: float = RECEIPT_PURGE_INTERVAL_SECONDS
) -> Callable[[asyncio.Event], Awaitable[None]]:
    async def run(stop: asyncio.Event) -> None:
        while not stop.is_set():
            await purger.purge_expired()
            await wait_for_stop(stop, interval_seconds)

    return run
