from __future__ import annotations

import uuid

import asyncpg

from signal_watcher.adapters.repository import WatcherRepository
from signal_watcher.service_layer.retention import RetentionCleaner
from tests.integration.signal_watcher.conftest import make_spec


async def test_old_check_rows_are_deleted_in_bounded_batches(
    pool: asyncpg.Pool, repo: WatcherRepository
) -> None:
    async with pool.acquire() as conn:
        watcher = await repo.insert(conn, "user-1", make_spec("https://example.com/"))
        for age_days in [91] * 25 + [89] * 3:
            await conn.execute(
                f"INSERT INTO {repo.schema.quoted}.checks (id, watcher_id, checked_at) "
                "VALUES ($1, $2, now() - make_interval(days => $3))",
                uuid.uuid4(),
                watcher.id,
                age_days,
            )
    cleaner = RetentionCleaner(pool, repo, 90, batch_rows=10, max_batches=2)
    assert await cleaner.clean_once() == 20  # bounded: two batches of ten per run
    assert await cleaner.clean_once() == 5
    assert await cleaner.clean_once() == 0
    async with pool.acquire() as conn:
        assert await conn.fetchval(f"SELECT count(*) FROM {repo.schema.quoted}.checks") == 3
