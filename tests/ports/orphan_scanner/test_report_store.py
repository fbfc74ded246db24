"""The report store (`ReportStore`) and the unit of work around it: PostgreSQL and the fake alike."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from orphan_scanner.domain.classify import Classification, ServerPath, classify
from orphan_scanner.domain.records import ApplyEnd, ApplyRun, Disposition, NewReport, PathDisposition
from tests.ports.orphan_scanner.conftest import Backdoor, Memory, OnPostgres, UnitOfWorkFactory, message

DEVICE = uuid.UUID("00000000-0000-4000-8000-00000000000a")
OTHER_DEVICE = uuid.UUID("00000000-0000-4000-8000-00000000000b")
FIFTEEN_MINUTES = timedelta(minutes=15)
STALE_1 = ServerPath("mtx-a", "stale-1")
STALE_1 = ServerPath("mtx-a", "stale-1")


def on(server: str, name: str) -> ServerPath:
    return ServerPath(server, name)


def fleet_classification() -> Classification:
    """mtx-a: 2 in use, 2 stale, 3 unowned; mtx-b: 1 stale (code-point order differs from a naive one)."""
    observed = [on("mtx-a", n) for n in ("live-1", "live-2", "stale-1", "stale-2", "a_cam", "B-cam", "a/cam")]
    observed.append(on("mtx-b", "stale-1"))
    claimed = {on("mtx-a", "live-1"), on("mtx-a", "live-2")}
    owners = {
        on("mtx-a", "stale-1"): DEVICE,
        on("mtx-a", "stale-2"): OTHER_DEVICE,
        on("mtx-b", "stale-1"): DEVICE,
    }
    return classify(observed, claimed, owners)


def new_report(trigger: str = "manual") -> NewReport:
    return NewReport(uuid.uuid4(), trigger, "scanner-1", uuid.uuid4())


async def insert_complete(
    uow: UnitOfWorkFactory,
    classification: Classification | None = None,
    servers: tuple[str, ...] = ("mtx-a",),
) -> uuid.UUID:
    report = new_report()
    async with uow() as u:
        await u.reports.insert_complete(report, classification or fleet_classification(), servers)
    return report.scan_id


async def insert_failed(uow: UnitOfWorkFactory, code: str = "mediamtx_timeout") -> uuid.UUID:
    report = new_report("periodic")
    async with uow() as u:
        await u.reports.insert_failed(report, code)
    return report.scan_id


async def start(uow: UnitOfWorkFactory, scan_id: uuid.UUID, apply_id: uuid.UUID | None = None) -> uuid.UUID:
    run = ApplyRun(apply_id or uuid.uuid4(), scan_id, "alice", "cli-1", 3)
    async with uow() as u:
        await u.reports.start_apply(run)
    return run.apply_id


async def finish(uow: UnitOfWorkFactory, apply_id: uuid.UUID, end: ApplyEnd) -> None:
    async with uow() as u:
        await u.reports.finish_apply(apply_id, end)


async def record(
    uow: UnitOfWorkFactory,
    scan_id: uuid.UUID,
    apply_id: uuid.UUID,
    outcome: str,
    error_code: str | None = None,
    path: ServerPath = STALE_1,
) -> None:
    async with uow() as u:
        await u.reports.record_disposition(
            PathDisposition(scan_id, apply_id, "alice", path, outcome, error_code)
        )


class Failure(Exception):
    pass


async def insert_then_fail(uow: UnitOfWorkFactory, report: NewReport) -> None:
    async with uow() as u:
        await u.reports.insert_complete(report, fleet_classification(), ("mtx-a",))
        await u.outbox.enqueue(message("ApplyBlocked"))
        raise Failure


class ReportStoreContract:
    """Fixtures of each adapter: `uow` (a unit-of-work factory), `backdoor`."""

    async def test_a_complete_report_reads_back_with_its_findings_and_server_counts(
        self, uow: UnitOfWorkFactory
    ) -> None:
        made = new_report()
        scan_id = made.scan_id
        async with uow() as u:
            created_at, expires_at = await u.reports.insert_complete(
                made, fleet_classification(), ("mtx-a", "mtx-b", "mtx-c")
            )
        assert expires_at - created_at == FIFTEEN_MINUTES
        async with uow() as u:
            report = await u.reports.load(scan_id)
        assert report is not None
        assert (report.scan_id, report.trigger, report.status, report.error_code) == (
            scan_id,
            "manual",
            "complete",
            None,
        )
        assert (report.created_at, report.expires_at) == (created_at, expires_at)
        assert 0 <= report.age_ms < 60_000
        counts = (report.observed_total, report.in_use_count, report.owned_stale_count, report.unowned_count)
        assert counts == (8, 2, 3, 3)
        assert list(report.candidates.items()) == [
            (on("mtx-a", "stale-1"), DEVICE),
            (on("mtx-a", "stale-2"), OTHER_DEVICE),
            (on("mtx-b", "stale-1"), DEVICE),
        ]
        assert report.unowned == [on("mtx-a", "B-cam"), on("mtx-a", "a/cam"), on("mtx-a", "a_cam")]
        assert list(report.server_totals.items()) == [("mtx-a", 7), ("mtx-b", 1), ("mtx-c", 0)]

    async def test_a_failed_report_has_its_code_and_nothing_else(self, uow: UnitOfWorkFactory) -> None:
        scan_id = await insert_failed(uow, "mediamtx_unreachable")
        async with uow() as u:
            report = await u.reports.load(scan_id)
            assert await u.reports.load(uuid.uuid4()) is None
        assert report is not None
        assert (report.status, report.error_code, report.trigger) == (
            "failed",
            "mediamtx_unreachable",
            "periodic",
        )
        assert (report.observed_total, report.in_use_count, report.owned_stale_count) == (None, None, None)
        assert (report.candidates, report.unowned, report.server_totals) == ({}, [], {})
        assert report.expires_at - report.created_at == FIFTEEN_MINUTES

    @pytest.mark.parametrize("extra", [timedelta(seconds=-1), timedelta(seconds=1)])
    async def test_the_age_is_whole_milliseconds_of_the_store_clock(
        self, uow: UnitOfWorkFactory, backdoor: Backdoor, extra: timedelta
    ) -> None:
        scan_id = await insert_complete(uow)
        await backdoor.age_report(scan_id, FIFTEEN_MINUTES + extra)
        older = (FIFTEEN_MINUTES + extra) // timedelta(milliseconds=1)
        async with uow() as u:
            age = await u.reports.report_age_ms(scan_id)
            report = await u.reports.load(scan_id)
        assert report is not None
        assert older <= age < older + 60_000
        assert age <= report.age_ms < older + 60_000  # read after `age`: the clock went on

    async def test_prune_removes_old_reports_no_apply_used_oldest_first_up_to_the_limit(
        self, uow: UnitOfWorkFactory, backdoor: Backdoor
    ) -> None:
        used, old, older, fresh = [await insert_complete(uow) for _ in range(4)]
        # oldest first: used (3 h), older (2.5 h), old (2 h); fresh stays young
        for scan_id, hours in ((used, 3.0), (older, 2.5), (old, 2.0)):
            await backdoor.age_report(scan_id, timedelta(hours=hours))
        await start(uow, used)
        async with uow() as u:
            assert await u.reports.prune(older_than_hours=1, limit=2) == 1  # the limit counts `used` too
        async with uow() as u:
            kept = {s for s in (used, old, older, fresh) if await u.reports.load(s) is not None}
        assert kept == {used, old, fresh}
        async with uow() as u:
            assert await u.reports.prune(older_than_hours=1, limit=2) == 1
            assert await u.reports.prune(older_than_hours=1) == 0
            assert await u.reports.load(used) is not None and await u.reports.load(fresh) is not None

    async def test_an_apply_run_starts_once_and_finishes_with_its_numbers(
        self, uow: UnitOfWorkFactory, backdoor: Backdoor
    ) -> None:
        scan_id = await insert_complete(uow)
        apply_id = await start(uow, scan_id)
        await start(uow, scan_id, apply_id)  # again: no second run
        runs = await backdoor.runs()
        assert len(runs) == 1
        assert runs[0] == {
            "scan_id": scan_id,
            "actor": "alice",
            "instance_id": "cli-1",
            "status": "running",
            "reason_code": None,
            "report_candidates": 3,
            "current_total": None,
            "current_candidates": None,
            "blocked_media_server_id": None,
            "counts": {"deleted": 0, "already_absent": 0, "skipped_not_stale": 0, "failed": 0},
        }
        counts = {"deleted": 1, "failed": 1, "skipped_not_stale": 1}
        await finish(
            uow, apply_id, ApplyEnd("partial", current_total=40, current_candidates=3, counts=counts)
        )
        (run,) = await backdoor.runs()
        assert (run["status"], run["current_total"], run["current_candidates"]) == ("partial", 40, 3)
        assert run["counts"] == {"deleted": 1, "already_absent": 0, "skipped_not_stale": 1, "failed": 1}

    async def test_totals_count_blocked_runs_deleted_paths_and_failed_deletes(
        self, uow: UnitOfWorkFactory, backdoor: Backdoor
    ) -> None:
        async with uow() as u:
            assert await u.reports.totals() == {"blocked": 0, "deleted": 0, "failed": 0}
        scan_id = await insert_complete(uow)
        for status, reason, counts, server in (
            ("blocked", "ratio_exceeded", {}, "mtx-b"),
            ("blocked", "projection_lagging", {}, None),
            ("completed", None, {"deleted": 2, "already_absent": 1}, None),
            ("partial", None, {"deleted": 1, "failed": 2}, None),
        ):
            end = ApplyEnd(status, reason, counts=counts, blocked_media_server_id=server)
            await finish(uow, await start(uow, scan_id), end)
        async with uow() as u:
            assert await u.reports.totals() == {"blocked": 2, "deleted": 3, "failed": 2}
        assert [r["blocked_media_server_id"] for r in await backdoor.runs()] == ["mtx-b", None, None, None]

    async def test_a_disposition_counts_the_runs_that_recorded_it_and_a_final_one_is_kept(
        self, uow: UnitOfWorkFactory
    ) -> None:
        scan_id = await insert_complete(uow)
        first, second, third = [await start(uow, scan_id) for _ in range(3)]
        path = on("mtx-a", "stale-1")
        await record(uow, scan_id, first, "attempting")
        await record(uow, scan_id, first, "failed", "mediamtx_http_500")  # the same run: one attempt
        async with uow() as u:
            assert await u.reports.dispositions(scan_id) == {
                path: Disposition(path, "failed", "mediamtx_http_500", 1)
            }
        await record(uow, scan_id, second, "deleted")
        await record(uow, scan_id, third, "failed", "mediamtx_timeout")  # a final outcome is never rewritten
        await record(uow, scan_id, third, "attempting")
        async with uow() as u:
            assert await u.reports.dispositions(scan_id) == {path: Disposition(path, "deleted", None, 2)}

    async def test_dispositions_are_per_report_and_per_server(self, uow: UnitOfWorkFactory) -> None:
        scan_id, other_scan = await insert_complete(uow), await insert_complete(uow)
        apply_id, other_apply = await start(uow, scan_id), await start(uow, other_scan)
        await record(uow, scan_id, apply_id, "already_absent", path=on("mtx-b", "stale-1"))
        await record(uow, scan_id, apply_id, "skipped_not_stale", path=on("mtx-a", "stale-1"))
        await record(uow, other_scan, other_apply, "deleted", path=on("mtx-a", "stale-2"))
        async with uow() as u:
            mine = await u.reports.dispositions(scan_id)
            assert await u.reports.dispositions(uuid.uuid4()) == {}
        assert mine == {
            on("mtx-b", "stale-1"): Disposition(on("mtx-b", "stale-1"), "already_absent", None, 1),
            on("mtx-a", "stale-1"): Disposition(on("mtx-a", "stale-1"), "skipped_not_stale", None, 1),
        }
        assert mine[on("mtx-b", "stale-1")].final and not mine[on("mtx-a", "stale-1")].final

    async def test_the_last_complete_counts_are_the_newest_usable_reports(
        self, uow: UnitOfWorkFactory, backdoor: Backdoor
    ) -> None:
        async with uow() as u:
            assert await u.reports.last_complete_counts() is None
        old = await insert_complete(uow, fleet_classification(), ("mtx-a", "mtx-b"))
        await backdoor.age_report(old, timedelta(minutes=2))
        newest = classify([on("mtx-a", "x"), on("mtx-a", "y")], {on("mtx-a", "x")}, {})
        await insert_complete(uow, newest, ("mtx-a", "mtx-b"))
        await insert_failed(uow)  # newer, but not usable
        async with uow() as u:
            assert await u.reports.last_complete_counts() == {
                "mtx-a": {"observed": 2, "in_use": 1, "owned_stale": 0, "unowned": 1},
                "mtx-b": {"observed": 0, "in_use": 0, "owned_stale": 0, "unowned": 0},
            }

    async def test_a_report_and_its_event_commit_together_or_not_at_all(
        self, uow: UnitOfWorkFactory, backdoor: Backdoor
    ) -> None:
        kept, lost = new_report(), new_report()
        async with uow() as u:
            await u.reports.insert_failed(kept, "mediamtx_timeout")
            await u.outbox.enqueue(message("ScanReported"))
        with pytest.raises(Failure):
            await insert_then_fail(uow, lost)
        async with uow() as u:
            assert await u.reports.load(kept.scan_id) is not None
            assert await u.reports.load(lost.scan_id) is None
        assert await backdoor.committed_events() == ["ScanReported"]


class TestPostgresReportStore(OnPostgres, ReportStoreContract):
    pass


class TestMemoryReportStore(Memory, ReportStoreContract):
    pass
