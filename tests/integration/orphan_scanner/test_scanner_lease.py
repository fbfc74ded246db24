"""The scanner singleton: one report per interval across instances, and a lost lease produces nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from orphan_scanner.domain.errors import ScanError
from orphan_scanner.entrypoints.main import Components, build
from orphan_scanner.service_layer.metrics import ScanTrigger
from orphan_scanner.service_layer.scanner import Scanner
from tests.support.orphan_scanner_fixtures import Orphan, orphan_settings
from tests.support.private_mediamtx import PrivateMediaMtx
from yovision_platform.mediamtx import SINGLE_MEDIA_SERVER_ID, MediaFleet, MediaMtxApi


async def report_count(orphan: Orphan, status: str = "complete") -> int:
    async with orphan.pool.acquire() as conn:
        count: int = await conn.fetchval(
            f"SELECT count(*) FROM {orphan.schema.name.quoted}.scan_reports WHERE status = $1", status
        )
    return count


@contextlib.asynccontextmanager
async def another_instance(
    orphan: Orphan, tmp_path: Path, *, mediamtx_api: MediaMtxApi | None = None, **overrides: object
) -> AsyncIterator[Components]:
    """The same service components as another process would build them (own instance id, own client)."""
    settings = orphan_settings(
        orphan.stack,
        orphan.schema,
        orphan.mediamtx,
        orphan.settings.projection_topics,
        tmp_path,
        **overrides,
    )
    fleet = None if mediamtx_api is None else MediaFleet({SINGLE_MEDIA_SERVER_ID: mediamtx_api})
    components = build(orphan.pool, orphan.schema.name, settings, client_id="another", fleet=fleet)
    try:
        yield components
    finally:
        await components.fleet.aclose()


async def test_two_scanners_produce_one_report_per_interval(orphan: Orphan, tmp_path: Path) -> None:
    await orphan.mediamtx.add_many([f"hand-{i}" for i in range(5)])
    async with (
        another_instance(orphan, tmp_path, instance_id="scanner-1", scan_interval_seconds=3600) as one,
        another_instance(orphan, tmp_path, instance_id="scanner-2", scan_interval_seconds=3600) as two,
    ):
        await scan_concurrently_twice(orphan, [one.use_cases.scanner, two.use_cases.scanner])


async def scan_concurrently_twice(orphan: Orphan, scanners: list[Scanner]) -> None:
    results = await asyncio.gather(*(s.scan(ScanTrigger.PERIODIC) for s in scanners))
    assert sum(r is not None for r in results) == 1
    assert await report_count(orphan) == 1
    again = await asyncio.gather(*(s.scan(ScanTrigger.PERIODIC) for s in scanners))
    assert again == [None, None]  # not due again before the interval ends
    assert await report_count(orphan) == 1


class ParkedEnumeration(MediaMtxApi):
    """The real client; its next enumeration waits until released (a scanner paused mid-scan)."""

    def __init__(self, server: PrivateMediaMtx, *, deadline_seconds: float = 5.0) -> None:
        super().__init__(
            server.url, deadline_seconds=deadline_seconds, credentials=server.sandbox.credentials
        )
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def _walk_pages(self) -> list[str]:  # inside the client's deadline, like a slow MediaMTX
        self.entered.set()
        await self.release.wait()
        return await super()._walk_pages()


async def test_a_scanner_that_lost_its_lease_produces_no_usable_report(
    orphan: Orphan, admin_conn: asyncpg.Connection, tmp_path: Path
) -> None:
    await orphan.feed.stale("stale-1")
    await orphan.mediamtx.add_many(["stale-1", *[f"hand-{i}" for i in range(9)]])
    await orphan.caught_up()
    parked = ParkedEnumeration(orphan.mediamtx)
    async with another_instance(orphan, tmp_path, mediamtx_api=parked, instance_id="paused") as paused:
        await lose_the_lease_mid_scan(orphan, admin_conn, paused.use_cases.scanner, parked)


async def lose_the_lease_mid_scan(
    orphan: Orphan, admin_conn: asyncpg.Connection, paused: Scanner, parked: ParkedEnumeration
) -> None:
    paused_scan = asyncio.create_task(paused.scan(ScanTrigger.MANUAL))
    await parked.entered.wait()
    # The pause outlives the lease (expired by the DB clock), and another instance takes over and scans.
    await admin_conn.execute(
        f"UPDATE {orphan.schema.name.quoted}.scan_leases SET lease_expires_at = now() - interval '1 second'"
    )
    successor = await orphan.components.use_cases.scanner.scan(ScanTrigger.MANUAL)
    assert successor is not None
    parked.release.set()
    with pytest.raises(ScanError) as lost:
        await paused_scan
    assert lost.value.code == "lease_lost"
    async with orphan.pool.acquire() as conn:
        ids = [r["id"] for r in await conn.fetch(f"SELECT id FROM {orphan.schema.name.quoted}.scan_reports")]
        events = await conn.fetchval(
            f"SELECT count(*) FROM {orphan.schema.name.quoted}.outbox WHERE event_type = 'ScanReported'"
        )
    assert ids == [successor.scan_id]
    assert events == 1


async def test_a_manual_report_waits_for_a_running_scan(orphan: Orphan, tmp_path: Path) -> None:
    parked = ParkedEnumeration(orphan.mediamtx, deadline_seconds=1.0)
    async with (
        another_instance(
            orphan, tmp_path, mediamtx_api=parked, scan_lease_seconds=1.5, mediamtx_deadline_seconds=1.0
        ) as holder,
        another_instance(orphan, tmp_path, scan_lease_seconds=1.5, mediamtx_deadline_seconds=1.0) as waiter,
    ):
        holding = asyncio.create_task(holder.use_cases.scanner.scan(ScanTrigger.MANUAL))
        await parked.entered.wait()
        report = await waiter.use_cases.scanner.scan(ScanTrigger.MANUAL)  # waits until the holder's scan ends
        assert report is not None
        with pytest.raises(ScanError) as timed_out:  # the whole enumeration is bounded by the deadline
            await holding
        assert timed_out.value.code == "mediamtx_timeout"
    assert (await report_count(orphan, "failed"), await report_count(orphan, "complete")) == (1, 1)
