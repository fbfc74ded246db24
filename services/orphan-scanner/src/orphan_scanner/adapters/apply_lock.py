"""One apply at a time: a PostgreSQL session advisory lock per schema, held on its own pooled connection for
the whole apply (a crashed apply releases it with its connection). The adapter of
`service_layer.ports.ApplyLock`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import asyncpg

from orphan_scanner.domain.errors import ApplyInProgress
from yovision_platform.storage import Identifier, session_advisory_lock


class PostgresApplyLock:
    def __init__(self, pool: asyncpg.Pool, schema: Identifier) -> None:
        self._pool = pool
        self.key = f"orphan-apply:{schema}"

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        async with session_advisory_lock(self._pool, self.key) as got:
            if not got:
                raise ApplyInProgress()
            yield
