from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tests.support.stack import MigratedSchema
from yovision_platform.errors import LeaseLost
from yovision_platform.storage import Identifier, LeaseTable


def jobs(schema: MigratedSchema) -> LeaseTable:
    return LeaseTable(schema.name, Identifier("jobs"))


async def add_jobs(pool: asyncpg.Pool, schema: MigratedSchema, count: int) -> None:
    await pool.executemany(
        f'INSERT INTO "{schema.name}".jobs (payload) VALUES ($1)', [(f"job-{i}",) for i in range(count)]
    )


async def test_a_stale_token_cannot_complete_after_takeover(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    table = jobs(migrated)
    await add_jobs(runtime_pool, migrated, 1)
    async with runtime_pool.acquire() as conn:
        [first] = await table.claim(conn, "worker-a", lease_seconds=0.2, limit=10)
    await asyncio.sleep(0.4)  # worker-a pauses past its lease (GC pause, network split...)
    async with runtime_pool.acquire() as conn:
        [second] = await table.claim(conn, "worker-b", lease_seconds=30, limit=10)
        assert second.row_id == first.row_id and second.lease.token != first.lease.token
        with pytest.raises(LeaseLost):
            await table.fenced_update(conn, first.row_id, first.lease, {"status": "done", "result": "stale"})
        with pytest.raises(LeaseLost):
            await table.renew(conn, first.row_id, first.lease, lease_seconds=30)
        await table.fenced_update(conn, second.row_id, second.lease, {"status": "done", "result": "fresh"})
        row = await conn.fetchrow(f'SELECT status, result, lease_owner FROM "{migrated.name}".jobs')
    assert dict(row) == {"status": "done", "result": "fresh", "lease_owner": None}


async def test_an_expired_lease_cannot_complete_even_without_takeover(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    table = jobs(migrated)
    await add_jobs(runtime_pool, migrated, 1)
    async with runtime_pool.acquire() as conn:
        [claimed] = await table.claim(conn, "worker-a", lease_seconds=0.2, limit=10)
        await asyncio.sleep(0.4)
        with pytest.raises(LeaseLost):
            await table.fenced_update(conn, claimed.row_id, claimed.lease, {"status": "done"})


async def test_renewal_extends_a_live_lease(runtime_pool: asyncpg.Pool, migrated: MigratedSchema) -> None:
    table = jobs(migrated)
    await add_jobs(runtime_pool, migrated, 1)
    async with runtime_pool.acquire() as conn:
        [claimed] = await table.claim(conn, "worker-a", lease_seconds=1, limit=10)
        renewed = await table.renew(conn, claimed.row_id, claimed.lease, lease_seconds=60)
        assert renewed.expires_at > claimed.lease.expires_at
        assert await table.claim(conn, "worker-b", lease_seconds=1, limit=10) == []


async def test_concurrent_claims_never_share_a_row(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    table = jobs(migrated)
    await add_jobs(runtime_pool, migrated, 300)

    async def claim_all(owner: str) -> list[object]:
        taken: list[object] = []
        while True:
            async with runtime_pool.acquire() as conn:
                rows = await table.claim(conn, owner, lease_seconds=30, limit=7)
            if not rows:
                return taken
            taken += [r.row_id for r in rows]

    results = await asyncio.gather(*(claim_all(f"w{i}") for i in range(4)))
    flat = [row for result in results for row in result]
    assert len(flat) == len(set(flat)) == 300


async def test_claim_respects_the_due_condition_and_limit(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema
) -> None:
    table = jobs(migrated)
    await add_jobs(runtime_pool, migrated, 5)
    await runtime_pool.execute(
        f"UPDATE \"{migrated.name}\".jobs SET next_attempt_at = now() + interval '1 hour' WHERE id <= 2"
    )
    async with runtime_pool.acquire() as conn:
        rows = await table.claim(
            conn,
            "w",
            lease_seconds=30,
            limit=2,
            due_condition="next_attempt_at <= now() AND payload <> $4",
            params=["job-4"],
            returning=["payload"],
        )
    assert [r.row["payload"] for r in rows] == ["job-2", "job-3"]


@pytest.mark.parametrize("limit", [0, 1001])
async def test_claim_limit_outside_bounds_is_refused(
    runtime_pool: asyncpg.Pool, migrated: MigratedSchema, limit: int
) -> None:
    async with runtime_pool.acquire() as conn:
        with pytest.raises(ValueError, match="limit"):
            await jobs(migrated).claim(conn, "w", lease_seconds=30, limit=limit)
