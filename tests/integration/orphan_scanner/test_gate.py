"""The safety gate on the real stack: the ratio at its boundary and the report's age by the database clock,
nothing deleted when blocked. (Every other boundary of SPEC section 3, 128/129 candidates included, is
checked on the fakes: tests/unit/orphan_scanner/test_apply_use_case.py.)"""

from __future__ import annotations

from datetime import timedelta

import asyncpg
import pytest

from orphan_scanner.domain.gate import BlockReason
from orphan_scanner.service_layer.apply import ApplyStatus
from tests.support.orphan_scanner_fixtures import Orphan


async def seed(orphan: Orphan, *, total: int, stale: int) -> list[str]:
    stale_names = [f"stale-{i:04d}" for i in range(stale)]
    for name in stale_names:
        await orphan.feed.stale(name)
    await orphan.mediamtx.add_many(stale_names + [f"hand-{i:04d}" for i in range(total - stale)])
    return stale_names


@pytest.mark.parametrize(
    ("total", "stale", "allowed"),
    [(100, 10, True), (100, 11, False)],
    ids=["10-of-100-allowed", "11-of-100-blocked"],
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
