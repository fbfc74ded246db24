from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from signal_watcher.adapters.memory import MemoryProbe, MemorySignalDatabase
from signal_watcher.domain.records import CheckRow
from signal_watcher.entrypoints.retention_worker import run_check_retention
from signal_watcher.service_layer.retention import RetentionCleaner
from tests.support.signal_watcher_fixtures import use_cases_on
from tests.unit.signal_watcher.conftest import checks_of, insert, make_spec, url


async def test_old_check_rows_are_deleted_in_bounded_batches(database: MemorySignalDatabase) -> None:
    watcher = await insert(database, "user-1", make_spec(url("/")))
    now = database.clock.now()
    async with database() as uow:
        for age_days in [91] * 25 + [89] * 3:
            at = now - timedelta(days=age_days)
            await uow.checks.insert(
                CheckRow(uuid.uuid4(), watcher.id, at, None, None, False, None, None, None, None)
            )
    cleaner = RetentionCleaner(database, 90, batch_rows=10, max_batches=2)
    assert await cleaner.clean_once() == 20  # bounded: two batches of ten per run
    assert await cleaner.clean_once() == 5
    assert await cleaner.clean_once() == 0
    assert len(await checks_of(database, watcher.id)) == 3


async def test_the_check_retention_worker_cleans_at_once_and_ends_on_stop(
    database: MemorySignalDatabase,
) -> None:
    watcher = await insert(database, "user-1", make_spec(url("/")))
    async with database() as uow:
        old = database.clock.now() - timedelta(days=91)
        await uow.checks.insert(
            CheckRow(uuid.uuid4(), watcher.id, old, None, None, False, None, None, None, None)
        )
    stop = asyncio.Event()
    worker = asyncio.create_task(run_check_retention(use_cases_on(database, MemoryProbe()).retention, stop))
    deadline = asyncio.get_running_loop().time() + 5
    while await checks_of(database, watcher.id):
        assert asyncio.get_running_loop().time() < deadline, "never cleaned"
        await asyncio.sleep(0.001)
    stop.set()
    await asyncio.wait_for(worker, 5)  # the hour's wait ends with the stop
