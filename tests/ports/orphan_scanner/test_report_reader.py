"""The read API's report reader (`ReportReader`): newest first, keyset-paged, the newest complete report;
PostgreSQL and the fake alike."""

from __future__ import annotations

import uuid
from datetime import timedelta

import asyncpg
import pytest

from orphan_scanner.adapters.memory import MemoryOrphanUnitOfWork, MemoryReportReader
from orphan_scanner.adapters.report_reader import PostgresReportReader
from orphan_scanner.domain.records import ReportPosition
from orphan_scanner.service_layer.ports import ReportReader
from tests.ports.orphan_scanner.conftest import Backdoor, Memory, OnPostgres, UnitOfWorkFactory
from tests.ports.orphan_scanner.test_report_store import insert_complete, insert_failed
from tests.support.stack import MigratedSchema


async def reports_by_age(uow: UnitOfWorkFactory, backdoor: Backdoor) -> list[uuid.UUID]:
    """Four reports, newest first: complete, failed, complete, complete (one minute apart)."""
    made = [await insert_complete(uow), await insert_failed(uow), await insert_complete(uow)]
    made.append(await insert_complete(uow))
    for minutes, scan_id in enumerate(made):
        await backdoor.age_report(scan_id, timedelta(minutes=minutes))
    return made


class ReportReaderContract:
    """Each adapter gives `uow`, `backdoor` (conftest) and `reader`."""

    async def test_nothing_yet(self, reader: ReportReader) -> None:
        assert await reader.page(10, None) == []
        assert await reader.latest_complete() is None
        assert await reader.load(uuid.uuid4()) is None

    async def test_pages_go_newest_first_and_continue_after_a_position(
        self, uow: UnitOfWorkFactory, backdoor: Backdoor, reader: ReportReader
    ) -> None:
        made = await reports_by_age(uow, backdoor)
        first = await reader.page(3, None)
        assert [r.scan_id for r in first] == made[:3]
        assert [r.status for r in first] == ["complete", "failed", "complete"]
        last = first[-1]
        rest = await reader.page(3, ReportPosition(last.created_at, last.scan_id))
        assert [r.scan_id for r in rest] == made[3:]
        assert await reader.page(3, ReportPosition(rest[-1].created_at, rest[-1].scan_id)) == []

    async def test_a_summary_carries_the_reports_counts(
        self, uow: UnitOfWorkFactory, backdoor: Backdoor, reader: ReportReader
    ) -> None:
        made = await reports_by_age(uow, backdoor)
        complete, failed = (await reader.page(2, None))[:2]
        assert (complete.observed_total, complete.owned_stale_count, complete.unowned_count) == (8, 3, 3)
        assert (complete.trigger, complete.error_code) == ("manual", None)
        assert (failed.observed_total, failed.owned_stale_count, failed.error_code) == (
            None,
            None,
            "mediamtx_timeout",
        )
        loaded = await reader.load(made[0])
        assert loaded is not None
        assert (complete.created_at, complete.expires_at) == (loaded.created_at, loaded.expires_at)

    async def test_the_latest_complete_report_skips_newer_failed_ones(
        self, uow: UnitOfWorkFactory, backdoor: Backdoor, reader: ReportReader
    ) -> None:
        made = await reports_by_age(uow, backdoor)
        await backdoor.age_report(made[0], timedelta(minutes=10))  # now the oldest
        assert await reader.latest_complete() == made[2]

    async def test_a_report_reads_as_the_store_reads_it(
        self, uow: UnitOfWorkFactory, reader: ReportReader
    ) -> None:
        scan_id = await insert_complete(uow, servers=("mtx-a", "mtx-b"))
        async with uow() as u:
            stored = await u.reports.load(scan_id)
        read = await reader.load(scan_id)
        assert stored is not None and read is not None
        assert (read.candidates, read.unowned, read.server_totals) == (
            stored.candidates,
            stored.unowned,
            stored.server_totals,
        )


class TestPostgresReportReader(OnPostgres, ReportReaderContract):
    @pytest.fixture
    def reader(self, orphan_pool: asyncpg.Pool, orphan_schema: MigratedSchema) -> ReportReader:
        return PostgresReportReader(orphan_pool, orphan_schema.name)


class TestMemoryReportReader(Memory, ReportReaderContract):
    @pytest.fixture
    def reader(self, memory_uow: MemoryOrphanUnitOfWork) -> ReportReader:
        return MemoryReportReader(memory_uow.reports)
