"""Check-row retention: rows older than the retention are deleted in bounded batches."""

from __future__ import annotations

import asyncio

from signal_watcher.service_layer.ports import UnitOfWorkFactory
from yovision_platform.backoff import wait_for_stop

__all__ = ["CLEANUP_BATCH_ROWS", "CLEANUP_INTERVAL_SECONDS", "CLEANUP_MAX_BATCHES", "RetentionCleaner"]

CLEANUP_INTERVAL_SECONDS = 3600.0
CLEANUP_BATCH_ROWS = 1000
CLEANUP_MAX_BATCHES = 20


class RetentionCleaner:
    def __init__(
        self,
        units_of_work: UnitOfWorkFactory,
        retention_days: int,
        *,
        batch_rows: int = CLEANUP_BATCH_ROWS,
        max_batches: int = CLEANUP_MAX_BATCHES,
    ) -> None:
        self._units_of_work = units_of_work
        self._days = retention_days
        self._batch_rows = batch_rows
        self._max_batches = max_batches

    async def clean_once(self) -> int:
        """Delete up to max_batches * batch_rows expired rows, one short transaction per batch."""
        deleted = 0
        for _ in range(self._max_batches):
            async with self._units_of_work() as uow:
                count = await uow.checks.delete_expired(retention_days=self._days, batch=self._batch_rows)
            deleted += count
            if count < self._batch_rows:
                break
        return deleted

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.clean_once()
            await wait_for_stop(stop, CLEANUP_INTERVAL_SECONDS)
