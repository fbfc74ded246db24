"""Exclusive locks across instances as PostgreSQL session advisory locks, each on a pooled connection of its
own held for the whole block; PostgreSQL drops one with the session of a dead process."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import asyncpg

from yovision_platform.db import Identifier

__all__ = ["AdvisoryLocks"]


class AdvisoryLocks:
    def __init__(self, pool: asyncpg.Pool, schema: Identifier) -> None:
        self._pool = pool
        self._schema = schema

    def material(self, material_id: uuid.UUID) -> contextlib.AbstractAsyncContextManager[bool]:
        return self._hold(f"{self._schema}.material:{material_id}")

    def merge_slot(self) -> contextlib.AbstractAsyncContextManager[bool]:
        return self._hold(f"{self._schema}:merge-slot")

    @contextlib.asynccontextmanager
    async def _hold(self, key: str) -> AsyncIterator[bool]:
        async with self._pool.acquire() as conn:
            held = bool(await conn.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", key))
            try:
                yield held
            finally:
                if held:
                    await conn.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", key)
