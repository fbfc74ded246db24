"""One apply at a time: a PostgreSQL session advisory lock per schema, held on its own pooled connection for
the whole apply (a crashed apply releases it with its connection). The adapter of
`service_layer.ports.ApplyLock`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import asyncpg

from orphan_scanner.domain.errors import ApplyInProgress
from yovision_platform.db import Identifier


class PostgresApplyLock:
    def __init__(self, pool: asyncpg.Pool, schema: Identifier) -> None:
        self._pool = pool
        self.key = f"orphan-apply:{schema}"

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        async with self._pool.acquire() as conn:
            got = await conn.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", self.key)
            if not got:
                raise ApplyInProgress()
            try:
                yield
            finally:
                await conn.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", self.key)
