"""The database itself refuses what the code must never do, whoever connects as the runtime role."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.support.stack import MigratedSchema


@pytest.fixture
async def runtime(orphan_schema: MigratedSchema) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(orphan_schema.runtime_dsn)
    yield conn
    await conn.close()


async def seeded_report(runtime: asyncpg.Connection, schema: MigratedSchema) -> tuple[uuid.UUID, uuid.UUID]:
    s = schema.name.quoted
    scan_id, apply_id = uuid.uuid4(), uuid.uuid4()
    await runtime.execute(
        f"INSERT INTO {s}.scan_reports (id, trigger, instance_id, lease_token, status, expires_at, "
        "observed_total, in_use_count, owned_stale_count, unowned_count) "
        "VALUES ($1, 'manual', 'i', gen_random_uuid(), 'complete', now() + interval '15 minutes', "
        "2, 0, 1, 1)",
        scan_id,
    )
    await runtime.execute(
        f"INSERT INTO {s}.scan_findings (scan_id, media_server_id, path_name, path_class, device_id) "
        "VALUES ($1, 'mtx-a', 'sense-made', 'owned_stale', gen_random_uuid()), "
        "($1, 'mtx-a', 'hand-made', 'unowned', NULL)",
        scan_id,
    )
    await runtime.execute(
        f"INSERT INTO {s}.apply_runs (id, scan_id, actor, instance_id, status, report_candidates) "
        "VALUES ($1, $2, 'mallory', 'i', 'running', 1)",
        apply_id,
        scan_id,
    )
    return scan_id, apply_id


async def test_a_disposition_for_an_unowned_path_is_refused(
    runtime: asyncpg.Connection, orphan_schema: MigratedSchema
) -> None:
    scan_id, apply_id = await seeded_report(runtime, orphan_schema)
    insert = (
        f"INSERT INTO {orphan_schema.name.quoted}.dispositions "
        "(scan_id, media_server_id, path_name, path_class, outcome, actor, apply_id) "
        "VALUES ($1, $2, $3, $4, 'deleted', 'mallory', $5)"
    )
    with pytest.raises(asyncpg.ForeignKeyViolationError):  # claims owned_stale; the report says unowned
        await runtime.execute(insert, scan_id, "mtx-a", "hand-made", "owned_stale", apply_id)
    with pytest.raises(asyncpg.CheckViolationError):  # says unowned: never a disposition
        await runtime.execute(insert, scan_id, "mtx-a", "hand-made", "unowned", apply_id)
    with pytest.raises(asyncpg.ForeignKeyViolationError):  # a path the report never classified
        await runtime.execute(insert, scan_id, "mtx-a", "in-use-or-unknown", "owned_stale", apply_id)
    with pytest.raises(asyncpg.ForeignKeyViolationError):  # the same name, but on another server
        await runtime.execute(insert, scan_id, "mtx-b", "sense-made", "owned_stale", apply_id)
    await runtime.execute(insert, scan_id, "mtx-a", "sense-made", "owned_stale", apply_id)  # the one allowed


async def test_findings_and_final_dispositions_cannot_be_rewritten(
    runtime: asyncpg.Connection, orphan_schema: MigratedSchema
) -> None:
    s = orphan_schema.name.quoted
    scan_id, apply_id = await seeded_report(runtime, orphan_schema)
    with pytest.raises(asyncpg.InsufficientPrivilegeError):  # reclassify hand-made as a candidate
        await runtime.execute(
            f"UPDATE {s}.scan_findings SET path_class = 'owned_stale' WHERE scan_id = $1", scan_id
        )
    await runtime.execute(
        f"INSERT INTO {s}.dispositions (scan_id, media_server_id, path_name, outcome, actor, apply_id) "
        "VALUES ($1, 'mtx-a', 'sense-made', 'deleted', 'mallory', $2)",
        scan_id,
        apply_id,
    )
    with pytest.raises(asyncpg.IntegrityConstraintViolationError):
        await runtime.execute(f"UPDATE {s}.dispositions SET outcome = 'failed', error_code = 'x'")
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await runtime.execute(f"DELETE FROM {s}.dispositions")
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await runtime.execute(f"DELETE FROM {s}.path_ownership")
    with pytest.raises(asyncpg.ForeignKeyViolationError):  # pruning never removes a report an apply used
        await runtime.execute(f"DELETE FROM {s}.scan_reports WHERE id = $1", scan_id)


async def test_a_report_is_valid_for_exactly_fifteen_minutes(
    runtime: asyncpg.Connection, orphan_schema: MigratedSchema
) -> None:
    s = orphan_schema.name.quoted
    with pytest.raises(asyncpg.CheckViolationError):
        await runtime.execute(
            f"INSERT INTO {s}.scan_reports (id, trigger, instance_id, lease_token, status, expires_at, "
            "observed_total, in_use_count, owned_stale_count, unowned_count) VALUES (gen_random_uuid(), "
            "'manual', 'i', gen_random_uuid(), 'complete', now() + interval '16 minutes', 0, 0, 0, 0)"
        )
