"""The two adapters of Bell's ports behind one face, for the contract suites of this folder.

A suite's `bell` fixture is a `Harness`: ``uow()`` opens a unit of work (the port), ``reader`` is the audit
reader, ``expire(key_id, nonce)`` ages one receipt past its lifetime (an owner's UPDATE on PostgreSQL, the
fake's own clock in memory). Suites read back only through the ports.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import asyncpg
import pytest

from bell_receiver.adapters.audit_reader import PostgresAuditReader
from bell_receiver.adapters.memory import MemoryBellUnitOfWork
from bell_receiver.entrypoints.main import MIGRATIONS_DIR, unit_of_work
from bell_receiver.service_layer.ports import AuditReader, UnitOfWorkFactory
from tests.support.stack import migrate_test_schema
from yovision_platform.localstack import LocalStack
from yovision_platform.storage import Identifier


@dataclass
class Harness:
    uow: UnitOfWorkFactory
    reader: AuditReader
    expire: Callable[[str, str], Awaitable[None]]


class PostgresHarness:
    """Mix in before a contract class: its `bell` fixture runs on a freshly migrated schema."""

    @pytest.fixture
    async def pool(
        self, stack: LocalStack, admin_conn: asyncpg.Connection, schema_name: Identifier
    ) -> AsyncIterator[asyncpg.Pool]:
        migrated = await migrate_test_schema(stack, admin_conn, schema_name, MIGRATIONS_DIR)
        async with asyncpg.create_pool(migrated.runtime_dsn, min_size=1, max_size=4) as pool:
            yield pool

    @pytest.fixture
    async def bell(
        self, pool: asyncpg.Pool, admin_conn: asyncpg.Connection, schema_name: Identifier
    ) -> Harness:
        async def expire(key_id: str, nonce: str) -> None:
            await admin_conn.execute(
                f"""UPDATE {schema_name.quoted}.audit_relay_receipts
                       SET received_at = now() - interval '601 seconds',
                           expires_at = now() - interval '1 second'
                     WHERE key_id = $1 AND nonce = $2""",
                key_id,
                nonce,
            )

        return Harness(unit_of_work(pool, schema_name), PostgresAuditReader(pool, schema_name), expire)


class MemoryHarness:
    """Mix in before a contract class: its `bell` fixture runs on the fakes."""

    @pytest.fixture
    async def bell(self) -> Harness:
        fakes = MemoryBellUnitOfWork()

        async def expire(key_id: str, nonce: str) -> None:
            fakes.receipts.expire(key_id, nonce)

        return Harness(fakes.factory(), fakes.reader(), expire)
