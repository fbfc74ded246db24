"""The check-retention worker: runs the `RetentionCleaner` use case once an hour until stopped."""

from __future__ import annotations

import asyncio

from signal_watcher.service_layer.retention import RetentionCleaner
from yovision_platform.backoff import wait_for_stop

__all__ = ["CLEANUP_INTERVAL_SECONDS", "run_check_retention"]

CLEANUP_INTERVAL_SECONDS = 3600.0


async def run_check_retention(
    cleaner: RetentionCleaner, stop: asyncio.Event, *, interval_seconds: float = CLEANUP_INTERVAL_SECONDS
) -> None:
    """Clean at once, then every `interval_seconds`, until `stop`."""
    while not stop.is_set():
        await cleaner.clean_once()
        await wait_for_stop(stop, interval_seconds)
