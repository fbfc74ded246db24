"""Exclusive locks across instances as PostgreSQL session advisory locks, each on a pooled connection of its
own held for the whole block; PostgreSQL drops one with the session of a dead process."""

from __future__ import annotations

import contextlib
import uuid

import asyncpg

from yovision_platform.storage import Identifier, session_advisory_lock

__all__ = ["AdvisoryLocks"]


class AdvisoryLocks:
    def __init__(self, pool: asyncpg.Pool, schema: Identifier) -> None:
        self._pool = pool
        self._schema = schema

    def material(self, material_id: uuid.UUID) -> contextlib.AbstractAsyncContextManager[bool]:
        return self._hold(f"{self._schema}.material:{material_id}")

    def merge_slot(self) -> contextlib.AbstractAsyncContextManager[bool]:
        return self._hold(f"{self._schema}:merge-slot")

    def _hold(self, key: str) -> contextlib.AbstractAsyncContextManager[bool]:
        return session_advisory_lock(self._pool, key)
