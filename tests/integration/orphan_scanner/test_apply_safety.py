"""apply only ever shrinks the report's target set, waits for the projection, and retries only failures."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from orphan_scanner.domain.errors import ApplyRefused
from orphan_scanner.domain.gate import BlockReason
from orphan_scanner.service_layer.apply import ApplyResult, ApplyStatus
from tests.conftest import MigratedSchema, Stack
from tests.integration.orphan_scanner.conftest import Orphan, names, orphan_harness
from tests.integration.orphan_scanner.private_mediamtx import PrivateMediaMtx
from tests.mediamtx_proxy import MediaMtxProxy
from yovision_platform.mediamtx import MediaMtxApi


def outcomes(result: ApplyResult) -> dict[str, str]:
    return {i.path.path_name: i.outcome for i in result.items if not i.earlier}


async def test_reclaimed_candidate_and_new_stale_path_are_not_deleted(orphan: Orphan) -> None:
    stale = ["stale-a", "stale-b", "stale-c"]
    for name in stale:
        await orphan.feed.stale(name)
    await orphan.mediamtx.add_many(stale + [f"hand-{i}" for i in range(37)])
    report = await orphan.fresh_report()
    assert names(report.classification.owned_stale) == set(stale)

    await orphan.feed.live("stale-b")  # a device claims stale-b again after the report
    await orphan.feed.stale("stale-new")  # a path that became stale after the report
    await orphan.mediamtx.add_many(["stale-new"])
    result = await orphan.apply_report(report)

    assert result.status is ApplyStatus.COMPLETED
    assert outcomes(result) == {"stale-a": "deleted", "stale-b": "skipped_not_stale", "stale-c": "deleted"}
    expected = {"stale-b", "stale-new", *[f"hand-{i}" for i in range(37)]}
    assert await orphan.mediamtx.settled(expected) == expected


async def test_lagging_projection_blocks_apply_until_it_catches_up(
    stack: Stack,
    orphan_schema: MigratedSchema,
    orphan_pool: asyncpg.Pool,
    mediamtx: PrivateMediaMtx,
    sense_topics: tuple[str, str],
    tmp_path: Path,
) -> None:
    async with orphan_harness(
        stack, orphan_schema, orphan_pool, mediamtx, sense_topics, tmp_path, catch_up_timeout_seconds=2.0
    ) as orphan:
        await orphan.feed.stale("stale-1")
        await orphan.feed.stale("stale-2")
        await orphan.mediamtx.add_many(["stale-1", "stale-2", *[f"hand-{i}" for i in range(18)]])
        report = await orphan.fresh_report()
        assert len(report.classification.owned_stale) == 2

        await orphan.stop_projection()
        await orphan.feed.live("stale-1")  # Sense claims stale-1 again; the projection has not seen it
        await orphan.feed.flush()
        before = await orphan.mediamtx.names()
        blocked = await orphan.apply_report(report)
        assert (blocked.status, blocked.reason_code) == (ApplyStatus.BLOCKED, BlockReason.PROJECTION_LAGGING)
        assert await orphan.mediamtx.settled(before) == before

        # The consumer comes back while apply waits: apply reaches the end offsets, then sees the claim.
        async def restart_later() -> None:
            await asyncio.sleep(0.5)
            orphan.start_projection()

        restart = asyncio.create_task(restart_later())
        orphan.components.apply._catch_up_timeout = 20.0
        result = await orphan.apply_report(report)
        await restart
        assert result.status is ApplyStatus.COMPLETED
        assert outcomes(result) == {"stale-1": "skipped_not_stale", "stale-2": "deleted"}
        assert "stale-1" in await orphan.mediamtx.names()


async def test_partial_failure_is_recorded_and_a_rerun_retries_only_the_failed_path(
    stack: Stack,
    orphan_schema: MigratedSchema,
    orphan_pool: asyncpg.Pool,
    mediamtx: PrivateMediaMtx,
    sense_topics: tuple[str, str],
    tmp_path: Path,
) -> None:
    proxy = MediaMtxProxy(mediamtx.url)
    proxy.refuse_deletes = {"stale-2"}
    async with proxy.running():
        api = MediaMtxApi(proxy.url, deadline_seconds=5.0, credentials=mediamtx.sandbox.credentials)
        async with orphan_harness(
            stack, orphan_schema, orphan_pool, mediamtx, sense_topics, tmp_path, mediamtx_api=api
        ) as orphan:
            stale = ["stale-1", "stale-2", "stale-3"]
            for name in stale:
                await orphan.feed.stale(name)
            await orphan.mediamtx.add_many(stale + [f"hand-{i}" for i in range(27)])
            report = await orphan.fresh_report()

            first = await orphan.apply_report(report)
            assert first.status is ApplyStatus.PARTIAL
            assert outcomes(first) == {"stale-1": "deleted", "stale-2": "failed", "stale-3": "deleted"}
            assert [i.error_code for i in first.items if i.outcome == "failed"] == ["mediamtx_http_500"]

            proxy.refuse_deletes = set()
            proxy.calls.clear()
            second = await orphan.apply_report(report)
            assert second.status is ApplyStatus.COMPLETED
            assert outcomes(second) == {"stale-2": "deleted"}
            assert {(i.path.path_name, i.outcome) for i in second.items if i.earlier} == {
                ("stale-1", "deleted"),
                ("stale-3", "deleted"),
            }
            assert [call for call in proxy.calls if call[0] == "DELETE"] == [
                ("DELETE", "v3/config/paths/delete/stale-2")
            ]
            async with orphan.pool.acquire() as conn:
                rows = await conn.fetch(
                    f"SELECT path_name, outcome, attempts FROM {orphan.schema.name.quoted}.dispositions "
                    "ORDER BY path_name"
                )
            assert [tuple(r) for r in rows] == [
                ("stale-1", "deleted", 1),
                ("stale-2", "deleted", 2),
                ("stale-3", "deleted", 1),
            ]
            expected = {f"hand-{i}" for i in range(27)}
            assert await orphan.mediamtx.settled(expected) == expected


async def test_a_crash_after_the_delete_is_recovered_as_deleted(
    orphan: Orphan, admin_conn: asyncpg.Connection
) -> None:
    await orphan.feed.stale("stale-1")
    await orphan.mediamtx.add_many(["stale-1", *[f"hand-{i}" for i in range(9)]])
    report = await orphan.fresh_report()
    # What a crash between the DELETE and its record leaves behind: an `attempting` disposition, path gone.
    s = orphan.schema.name.quoted
    await admin_conn.execute(
        f"INSERT INTO {s}.apply_runs (id, scan_id, actor, instance_id, status, report_candidates) "
        "VALUES (gen_random_uuid(), $1, 'crashed', 'gone', 'running', 1)",
        report.scan_id,
    )
    await admin_conn.execute(
        f"INSERT INTO {s}.dispositions (scan_id, media_server_id, path_name, outcome, actor, apply_id) "
        f"SELECT $1, 'default', 'stale-1', 'attempting', 'crashed', id FROM {s}.apply_runs",
        report.scan_id,
    )
    await orphan.mediamtx.delete("stale-1")
    result = await orphan.apply_report(report)
    assert result.status is ApplyStatus.COMPLETED
    assert outcomes(result) == {"stale-1": "deleted"}


async def test_one_apply_at_a_time(orphan: Orphan) -> None:
    await orphan.feed.stale("stale-1")
    await orphan.mediamtx.add_many(["stale-1", *[f"hand-{i}" for i in range(9)]])
    report = await orphan.fresh_report()
    async with orphan.pool.acquire() as conn:
        key = f"orphan-apply:{orphan.schema.name}"
        assert await conn.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", key)
        try:
            with pytest.raises(ApplyRefused) as refused:
                await orphan.apply_report(report)
            assert refused.value.code == "apply_in_progress"
        finally:
            await conn.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", key)
    assert "stale-1" in await orphan.mediamtx.names()
