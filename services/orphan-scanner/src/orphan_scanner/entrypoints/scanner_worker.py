"""Worker ``scanner``: the periodic read-only scan. It tries every few seconds; the lease's `next_scan_at`
makes it one scan per interval across all instances."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from orphan_scanner.domain.errors import ScanError
from orphan_scanner.service_layer.metrics import ScanTrigger
from orphan_scanner.service_layer.scanner import Scanner
from yovision_platform.backoff import wait_for_stop

MAX_POLL_SECONDS = 5.0


def scanner_worker(scanner: Scanner) -> Callable[[asyncio.Event], Awaitable[None]]:
    async def run(stop: asyncio.Event) -> None:
        poll = min(scanner.interval_seconds, MAX_POLL_SECONDS)
        while not stop.is_set():
            with contextlib.suppress(ScanError):  # counted and logged by scan(); the next interval retries
                await scanner.scan(ScanTrigger.PERIODIC)
            await wait_for_stop(stop, poll)

    return run
