"""Fixtures of the contract suites of sense-reconciler: the PostgreSQL backend (a migrated schema of its
own per test) and the in-memory one."""

from __future__ import annotations

import asyncpg
import pytest

from sense_reconciler.adapters.memory import MemorySense
from tests.support.sense_audit_push_fixtures import bell, bell_url, keys
from tests.support.sense_backends import Backend, MemoryBackend, PostgresBackend
from tests.support.sense_reconciler_fixtures import sense_pool, sense_schema, serde
from tests.support.stack import MigratedSchema

__all__ = [
    "bell",
    "bell_url",
    "keys",
    "memory_backend",
    "postgres_backend",
    "sense_pool",
    "sense_schema",
    "serde",
]


@pytest.fixture
async def postgres_backend(sense_pool: asyncpg.Pool, sense_schema: MigratedSchema) -> Backend:
    return PostgresBackend(sense_pool, sense_schema.name)


@pytest.fixture
def memory_backend() -> Backend:
    return MemoryBackend(MemorySense())
