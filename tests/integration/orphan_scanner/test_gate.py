"""The safety gate on the real stack: every boundary from SPEC section 3, nothing deleted when blocked."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest

from orphan_scanner.domain.gate import BlockReason
from orphan_scanner.domain.inputs import confirmation_text
from orphan_scanner.service_layer.apply import ApplyStatus
from tests.conftest import MigratedSchema, Stack
from tests.integration.orphan_scanner.conftest import Orphan, orphan_harness
from tests.integration.orphan_scanner.private_mediamtx import private_mediamtx


async def seed(orphan: Orphan, *, total: int, stale: int) -> list[str]:
    stale_names = [f"stale-{i:04d}" for i in range(stale)]
    for name in stale_names:
        await orphan.feed.stale(name)
    await orphan.mediamtx.add_many(stale_names + [f"hand-{i:04d}" for i in range(total - stale)])
    return stale_names


@pytest.mark.parametrize(
    ("total", "stale", "allowed"),
    [(100, 10, True), (100, 11, False), (10, 1, True), (10, 2, False)],
    ids=["10-of-100-allowed", "11-of-100-blocked", "1-of-10-allowed", "2-of-10-blocked"],
)
async def test_ten_percent_boundary(orphan: Orphan, total: int, stale: int, allowed: bool) -> None:
    stale_names = await seed(orphan, total=total, stale=stale)
    before = await orphan.mediamtx.names()
    result = await orphan.apply_report(await orphan.fresh_report())
    if allowed:
        assert result.status is ApplyStatus.COMPLETED
        expected = before - set(stale_names)
        assert await orphan.mediamtx.settled(expected) == expected
    else:
        assert result.status is ApplyStatus.BLOCKED
        assert result.reason_code is BlockReason.RATIO_EXCEEDED
        assert await orphan.mediamtx.settled(before) == before


async def test_128_candidates_allowed_129_blocked(
    stack: Stack,
    orphan_schema: MigratedSchema,
    orphan_pool: asyncpg.Pool,
    sense_topics: tuple[str, str],
    tmp_path: Path,
) -> None:
    stale_names = [f"stale-{i:04d}" for i in range(129)]
    preload = stale_names + [f"hand-{i:04d}" for i in range(1290 - 129)]
    async with (
        private_mediamtx(tmp_path, preload=preload) as server,
        orphan_harness(stack, orphan_schema, orphan_pool, server, sense_topics, tmp_path) as orphan,
    ):
        for name in stale_names:
            await orphan.feed.stale(name)
        before = await orphan.mediamtx.names()
        assert len(before) == 1290
        report = await orphan.fresh_report()
        assert len(report.classification.owned_stale) == 129
        blocked = await orphan.apply_report(report)
        assert (blocked.status, blocked.reason_code) == (ApplyStatus.BLOCKED, BlockReason.TOO_MANY_CANDIDATES)
        assert await orphan.mediamtx.settled(before) == before

        await orphan.feed.live(stale_names[0])  # a device claims one again: 128 candidates of 1290
        report = await orphan.fresh_report()
        assert len(report.classification.owned_stale) == 128
        result = await orphan.apply_report(report)
        assert result.status is ApplyStatus.COMPLETED
        assert result.counts() == {"deleted": 128}
        expected = before - set(stale_names[1:])
        assert await orphan.mediamtx.settled(expected) == expected


async def test_zero_candidates_blocked(orphan: Orphan) -> None:
    await orphan.mediamtx.add_many([f"hand-{i}" for i in range(20)])
    result = await orphan.apply_report(await orphan.fresh_report())
    assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.NO_CANDIDATES)


async def test_zero_configured_paths_blocked(orphan: Orphan) -> None:
    result = await orphan.apply_report(await orphan.fresh_report())
    assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.NO_PATHS)


async def test_total_dropping_to_zero_after_the_report_blocks(orphan: Orphan) -> None:
    await orphan.feed.stale("only-one")
    await orphan.mediamtx.add_many(["only-one", *[f"hand-{i}" for i in range(9)]])
    report = await orphan.fresh_report()
    for name in await orphan.mediamtx.names():
        await orphan.mediamtx.delete(name)
    result = await orphan.apply_report(report)
    assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.NO_PATHS)


@pytest.mark.parametrize(
    ("offset", "allowed"),
    [(timedelta(seconds=-1), True), (timedelta(seconds=1), False)],
    ids=["14m59s-allowed", "15m01s-blocked"],
)
async def test_report_age_boundary(
    orphan: Orphan, admin_conn: asyncpg.Connection, offset: timedelta, allowed: bool
) -> None:
    stale_names = await seed(orphan, total=10, stale=1)
    report = await orphan.fresh_report()
    # Age the report as the DB clock sees it (the runtime role cannot rewrite a report: done as admin).
    await admin_conn.execute(
        f"UPDATE {orphan.schema.name.quoted}.scan_reports SET created_at = now() - $2::interval, "
        "expires_at = now() - $2::interval + interval '15 minutes' WHERE id = $1",
        report.scan_id,
        timedelta(minutes=15) + offset,
    )
    before = await orphan.mediamtx.names()
    result = await orphan.apply_report(report)
    if allowed:
        assert result.status is ApplyStatus.COMPLETED
        expected = before - set(stale_names)
        assert await orphan.mediamtx.settled(expected) == expected
    else:
        assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.REPORT_EXPIRED)
        assert await orphan.mediamtx.settled(before) == before


async def test_wrong_confirmation_is_blocked(orphan: Orphan) -> None:
    await seed(orphan, total=10, stale=1)
    report = await orphan.fresh_report()
    before = await orphan.mediamtx.names()
    for text in (
        confirmation_text(report.scan_id, 2),
        confirmation_text(report.scan_id, 1).upper(),
        confirmation_text(report.scan_id, 1) + " ",
    ):
        result = await orphan.components.apply.apply(report.scan_id, actor="alice", confirmation=text)
        assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.CONFIRMATION_MISMATCH)
    assert await orphan.mediamtx.settled(before) == before


async def test_a_finished_apply_rerun_after_expiry_reports_its_results(
    orphan: Orphan, admin_conn: asyncpg.Connection
) -> None:
    await seed(orphan, total=10, stale=1)
    report = await orphan.fresh_report()
    assert (await orphan.apply_report(report)).status is ApplyStatus.COMPLETED
    await admin_conn.execute(
        f"UPDATE {orphan.schema.name.quoted}.scan_reports SET created_at = now() - interval '1 hour', "
        "expires_at = now() - interval '45 minutes' WHERE id = $1",
        report.scan_id,
    )
    rerun = await orphan.apply_report(report)
    assert rerun.status is ApplyStatus.COMPLETED
    assert [(i.path.path_name, i.outcome, i.earlier) for i in rerun.items] == [
        ("stale-0000", "deleted", True)
    ]
