"""Check-row retention: rows older than the retention are deleted in bounded batches (the loop that runs it
every hour is `entrypoints/retention_worker.py`)."""

from __future__ import annotations

from signal_watcher.service_layer.ports import UnitOfWorkFactory

__all__ = ["CLEANUP_BATCH_ROWS", "CLEANUP_MAX_BATCHES", "RetentionCleaner"]

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
