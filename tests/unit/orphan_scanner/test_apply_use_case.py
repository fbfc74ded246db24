"""`apply` on the fakes: the confirmation, the gate at every boundary, the target set only shrinking, the
projection catch-up, partial failures and re-runs, crash recovery, one apply at a time. Nothing is deleted
unless every condition holds. (On the real stack: tests/integration/orphan_scanner.)"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from orphan_scanner.adapters.memory import MemoryMediaMtxPaths
from orphan_scanner.domain.errors import ApplyInProgress, ScanFailed, ScanNotFound, ScanNotUsable
from orphan_scanner.domain.gate import BlockReason
from orphan_scanner.domain.inputs import confirmation_text
from orphan_scanner.domain.records import ApplyRun, Disposition, PathDisposition
from orphan_scanner.service_layer.apply import ApplyResult, ApplyStatus
from tests.support.orphan_world import World, names, on, world

FIFTEEN_MINUTES = timedelta(minutes=15)


def outcomes(result: ApplyResult) -> dict[str, str]:
    return {i.path.path_name: i.outcome for i in result.items if not i.earlier}


async def seed(w: World, *, total: int, stale: int) -> list[str]:
    stale_names = [f"stale-{i:04d}" for i in range(stale)]
    for name in stale_names:
        await w.stale(name)
    w.mediamtx.paths |= {*stale_names, *(f"hand-{i:04d}" for i in range(total - stale))}
    return stale_names


async def test_only_owned_stale_paths_are_deleted_and_a_rerun_redoes_nothing() -> None:
    w = world()
    live, stale = [f"live-{i}" for i in range(10)], ["old-cam-1", "old-cam-2"]
    hand_made = [f"hand-{i}" for i in range(8)]
    for name in live:
        await w.live(name)
    for name in stale:
        await w.stale(name)
    w.mediamtx.paths |= {*live, *stale, *hand_made}
    scan = await w.report()
    assert names(scan.classification.in_use) == set(live)
    assert names(scan.classification.owned_stale) == set(stale)
    assert names(scan.classification.unowned) == set(hand_made)

    result = await w.apply_report(scan, actor="alice")
    assert result.status is ApplyStatus.COMPLETED, result
    assert sorted((i.path.path_name, i.outcome) for i in result.items) == [(n, "deleted") for n in stale]
    assert w.mediamtx.paths == {*live, *hand_made}
    assert w.mediamtx.delete_requests == sorted(stale)

    again = await w.apply_report(scan, actor="alice")
    assert again.status is ApplyStatus.COMPLETED
    assert sorted((i.path.path_name, i.outcome, i.earlier) for i in again.items) == [
        (n, "deleted", True) for n in stale
    ]
    assert w.mediamtx.delete_requests == sorted(stale)  # nothing sent again
    assert [run["status"] for run in w.runs()] == ["completed", "completed"]


async def test_apply_records_its_run_and_one_event_per_path() -> None:
    w = world(paths=["gone-1", *(f"hand-{i}" for i in range(9))])
    device = await w.stale("gone-1")
    scan = await w.report()
    result = await w.apply_report(scan, actor="bob")
    (run,) = w.runs()
    assert (run["status"], run["counts"]["deleted"], run["actor"], run["current_total"]) == (
        "completed",
        1,
        "bob",
        10,
    )
    assert w.event_types() == ["ScanReported", "PathDisposed"]
    (disposed,) = w.events("PathDisposed")
    assert {k: disposed[k] for k in ("scan_id", "path_name", "media_server_id", "device_id", "actor")} == {
        "scan_id": str(scan.scan_id),
        "path_name": "gone-1",
        "media_server_id": "default",
        "device_id": str(device),
        "actor": "bob",
    }
    assert (disposed["outcome"], disposed["error_code"]) == ("deleted", None)
    assert disposed["envelope"]["correlation_id"] == str(result.apply_id)


@pytest.mark.parametrize(
    ("total", "stale", "allowed"),
    [(100, 10, True), (100, 11, False), (10, 1, True), (10, 2, False)],
    ids=["10-of-100-allowed", "11-of-100-blocked", "1-of-10-allowed", "2-of-10-blocked"],
)
async def test_ten_percent_boundary(total: int, stale: int, allowed: bool) -> None:
    w = world()
    stale_names = await seed(w, total=total, stale=stale)
    before = set(w.mediamtx.paths)
    result = await w.apply_report(await w.report())
    if allowed:
        assert result.status is ApplyStatus.COMPLETED
        assert w.mediamtx.paths == before - set(stale_names)
    else:
        assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.RATIO_EXCEEDED)
        assert w.mediamtx.paths == before and w.mediamtx.delete_requests == []
        assert (result.current_total, result.current_candidates) == (total, stale)


async def test_128_candidates_allowed_129_blocked() -> None:
    w = world()
    stale_names = await seed(w, total=1290, stale=129)
    before = set(w.mediamtx.paths)
    report = await w.report()
    assert len(report.classification.owned_stale) == 129
    blocked = await w.apply_report(report)
    assert (blocked.status, blocked.reason_code) == (ApplyStatus.BLOCKED, BlockReason.TOO_MANY_CANDIDATES)
    assert w.mediamtx.paths == before

    await w.live(stale_names[0])  # a device claims one again: 128 candidates of 1290
    report = await w.report()
    assert len(report.classification.owned_stale) == 128
    result = await w.apply_report(report)
    assert result.status is ApplyStatus.COMPLETED
    assert result.counts() == {"deleted": 128}
    assert w.mediamtx.paths == before - set(stale_names[1:])


async def test_zero_candidates_blocked() -> None:
    w = world(paths=[f"hand-{i}" for i in range(20)])
    result = await w.apply_report(await w.report())
    assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.NO_CANDIDATES)


async def test_zero_configured_paths_blocked() -> None:
    w = world()
    result = await w.apply_report(await w.report())
    assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.NO_PATHS)


async def test_total_dropping_to_zero_after_the_report_blocks() -> None:
    w = world()
    await seed(w, total=10, stale=1)
    report = await w.report()
    w.mediamtx.paths.clear()
    result = await w.apply_report(report)
    assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.NO_PATHS)


@pytest.mark.parametrize(
    ("offset", "allowed"),
    [(timedelta(seconds=-1), True), (timedelta(seconds=1), False)],
    ids=["14m59s-allowed", "15m01s-blocked"],
)
async def test_report_age_boundary(offset: timedelta, allowed: bool) -> None:
    w = world()
    stale_names = await seed(w, total=10, stale=1)
    report = await w.report()
    w.db.clock.advance(FIFTEEN_MINUTES + offset)
    before = set(w.mediamtx.paths)
    result = await w.apply_report(report)
    if allowed:
        assert result.status is ApplyStatus.COMPLETED
        assert w.mediamtx.paths == before - set(stale_names)
    else:
        assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.REPORT_EXPIRED)
        assert w.mediamtx.paths == before


async def test_wrong_confirmation_is_blocked() -> None:
    w = world()
    await seed(w, total=10, stale=1)
    report = await w.report()
    before = set(w.mediamtx.paths)
    for text in (
        confirmation_text(report.scan_id, 2),
        confirmation_text(report.scan_id, 1).upper(),
        confirmation_text(report.scan_id, 1) + " ",
    ):
        result = await w.apply.apply(report.scan_id, actor="alice", confirmation=text)
        assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.CONFIRMATION_MISMATCH)
    assert w.mediamtx.paths == before
    assert [run["reason_code"] for run in w.runs()] == ["confirmation_mismatch"] * 3
    assert w.event_types() == ["ScanReported", "ApplyBlocked", "ApplyBlocked", "ApplyBlocked"]


async def test_a_finished_apply_rerun_after_expiry_reports_its_results() -> None:
    w = world()
    await seed(w, total=10, stale=1)
    report = await w.report()
    assert (await w.apply_report(report)).status is ApplyStatus.COMPLETED
    w.db.clock.advance(timedelta(hours=1))
    rerun = await w.apply_report(report)
    assert rerun.status is ApplyStatus.COMPLETED
    assert [(i.path.path_name, i.outcome, i.earlier) for i in rerun.items] == [
        ("stale-0000", "deleted", True)
    ]


async def test_reclaimed_candidate_and_new_stale_path_are_not_deleted() -> None:
    w = world()
    stale = ["stale-a", "stale-b", "stale-c"]
    hand_made = {f"hand-{i}" for i in range(37)}
    for name in stale:
        await w.stale(name)
    w.mediamtx.paths |= {*stale, *hand_made}
    report = await w.report()
    assert names(report.classification.owned_stale) == set(stale)

    await w.live("stale-b")  # a device claims stale-b again after the report
    await w.stale("stale-new")  # a path that became stale after the report
    w.mediamtx.paths.add("stale-new")
    result = await w.apply_report(report)
    assert result.status is ApplyStatus.COMPLETED
    assert outcomes(result) == {"stale-a": "deleted", "stale-b": "skipped_not_stale", "stale-c": "deleted"}
    assert w.mediamtx.paths == {"stale-b", "stale-new", *hand_made}


async def test_a_candidate_claimed_while_apply_runs_is_skipped_at_its_recheck() -> None:
    class ReclaimOnFirstDelete(MemoryMediaMtxPaths):
        async def delete_path(self, name: str) -> bool:
            if not self.delete_requests:
                await w.live("stale-2")  # Sense's event arrives while the first delete is under way
            return await super().delete_path(name)

    w = World({"default": ReclaimOnFirstDelete([f"hand-{i}" for i in range(28)], deadline_seconds=5.0)})
    for name in ("stale-1", "stale-2"):
        await w.stale(name)
    w.mediamtx.paths |= {"stale-1", "stale-2"}
    result = await w.apply_report(await w.report())
    assert result.status is ApplyStatus.COMPLETED
    assert outcomes(result) == {"stale-1": "deleted", "stale-2": "skipped_not_stale"}
    assert w.mediamtx.delete_requests == ["stale-1"]


async def test_a_lagging_projection_blocks_until_it_catches_up() -> None:
    w = world()
    await seed(w, total=20, stale=2)
    report = await w.report()
    w.progress.published += 1  # Sense published an event the projection has not applied
    before = set(w.mediamtx.paths)
    blocked = await w.apply_report(report)
    assert (blocked.status, blocked.reason_code) == (ApplyStatus.BLOCKED, BlockReason.PROJECTION_LAGGING)
    assert w.mediamtx.paths == before

    # The consumer catches up while apply waits (well within the wait).
    w.apply._catch_up_timeout = 10.0
    asyncio.get_running_loop().call_soon(setattr, w.progress, "applied", w.progress.published)
    result = await w.apply_report(report)
    assert result.status is ApplyStatus.COMPLETED
    assert result.counts() == {"deleted": 2}


@pytest.mark.parametrize(
    ("what_fails", "reason"),
    [("kafka", BlockReason.PROJECTION_UNAVAILABLE), ("mediamtx", BlockReason.ENUMERATION_FAILED)],
)
async def test_kafka_or_mediamtx_that_cannot_answer_blocks(what_fails: str, reason: BlockReason) -> None:
    w = world()
    await seed(w, total=20, stale=2)
    report = await w.report()
    if what_fails == "kafka":
        w.progress.unavailable = True
    else:
        w.mediamtx.unreachable = True
    blocked = await w.apply_report(report)
    assert (blocked.status, blocked.reason_code) == (ApplyStatus.BLOCKED, reason)
    assert w.mediamtx.delete_requests == []


async def test_partial_failure_is_recorded_and_a_rerun_retries_only_the_failed_path() -> None:
    w = world()
    stale = ["stale-1", "stale-2", "stale-3"]
    for name in stale:
        await w.stale(name)
    w.mediamtx.paths |= {*stale, *(f"hand-{i}" for i in range(27))}
    w.mediamtx.refuse_deletes = {"stale-2"}
    report = await w.report()

    first = await w.apply_report(report)
    assert first.status is ApplyStatus.PARTIAL
    assert outcomes(first) == {"stale-1": "deleted", "stale-2": "failed", "stale-3": "deleted"}
    assert [i.error_code for i in first.items if i.outcome == "failed"] == ["mediamtx_http_500"]
    assert (w.runs()[0]["counts"]["failed"], w.runs()[0]["status"]) == (1, "partial")

    w.mediamtx.refuse_deletes = set()
    w.mediamtx.delete_requests.clear()
    second = await w.apply_report(report)
    assert second.status is ApplyStatus.COMPLETED
    assert outcomes(second) == {"stale-2": "deleted"}
    assert {(i.path.path_name, i.outcome) for i in second.items if i.earlier} == {
        ("stale-1", "deleted"),
        ("stale-3", "deleted"),
    }
    assert w.mediamtx.delete_requests == ["stale-2"]
    async with w.db as uow:
        dispositions = await uow.reports.dispositions(report.scan_id)
    assert sorted((d.path.path_name, d.outcome, d.attempts) for d in dispositions.values()) == [
        ("stale-1", "deleted", 1),
        ("stale-2", "deleted", 2),
        ("stale-3", "deleted", 1),
    ]
    assert w.mediamtx.paths == {f"hand-{i}" for i in range(27)}


async def test_a_crash_after_the_delete_is_recovered_as_deleted() -> None:
    w = world()
    await seed(w, total=10, stale=1)
    report = await w.report()
    path = on("default", "stale-0000")
    # What a crash between the DELETE and its record leaves behind: an `attempting` disposition, path gone.
    crashed = uuid.uuid4()
    async with w.db as uow:
        await uow.reports.start_apply(ApplyRun(crashed, report.scan_id, "crashed", "gone", 1))
        await uow.reports.record_disposition(
            PathDisposition(report.scan_id, crashed, "x", path, "attempting")
        )
    w.mediamtx.paths.discard("stale-0000")
    result = await w.apply_report(report)
    assert result.status is ApplyStatus.COMPLETED
    assert outcomes(result) == {"stale-0000": "deleted"}
    assert w.mediamtx.delete_requests == []  # recorded, not sent again
    async with w.db as uow:
        assert (await uow.reports.dispositions(report.scan_id))[path] == Disposition(path, "deleted", None, 2)


async def test_one_apply_at_a_time() -> None:
    w = world()
    await seed(w, total=10, stale=1)
    report = await w.report()
    async with w.lock.hold():
        with pytest.raises(ApplyInProgress) as refused:
            await w.apply_report(report)
    assert (refused.value.code, refused.value.status) == ("apply_in_progress", 409)
    assert "stale-0000" in w.mediamtx.paths and w.runs() == []


async def test_an_unknown_or_failed_scan_is_refused_and_nothing_is_recorded() -> None:
    w = world()
    with pytest.raises(ScanNotFound) as unknown:
        await w.apply.apply(uuid.uuid4(), actor="alice", confirmation="anything")
    assert (unknown.value.code, unknown.value.status) == ("scan_not_found", 404)
    w.mediamtx.unreachable = True
    with pytest.raises(ScanFailed, match="mediamtx_unreachable"):
        await w.report()
    (failed,) = w.db.reports.scans
    with pytest.raises(ScanNotUsable) as unusable:
        await w.apply.apply(failed, actor="alice", confirmation="anything")
    assert (unusable.value.code, unusable.value.status) == ("scan_not_usable", 409)
    assert w.runs() == [] and w.event_types() == []


async def test_the_gate_is_computed_per_server_and_blocks_the_whole_batch() -> None:
    # 1 candidate among 20 paths of mtx-a is 5 %; 1 among the 5 paths of mtx-b is 20 %: blocked, naming mtx-b,
    # although the fleet-wide ratio (2 of 25, 8 %) would pass
    w = world("mtx-a", "mtx-b")
    await w.stale("a-stale", server="mtx-a")
    await w.stale("b-stale", server="mtx-b")
    w.servers["mtx-a"].paths |= {"a-stale", *(f"a-hand-{n}" for n in range(19))}
    w.servers["mtx-b"].paths |= {"b-stale", *(f"b-hand-{n}" for n in range(4))}
    report = await w.report()
    assert set(report.classification.owned_stale) == {on("mtx-a", "a-stale"), on("mtx-b", "b-stale")}
    result = await w.apply_report(report)
    assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.RATIO_EXCEEDED)
    assert result.blocked_media_server_id == "mtx-b" and result.items == []
    assert "a-stale" in w.servers["mtx-a"].paths and "b-stale" in w.servers["mtx-b"].paths
    (blocked,) = w.events("ApplyBlocked")
    assert (blocked["media_server_id"], blocked["reason_code"], blocked["actor"]) == (
        "mtx-b",
        "ratio_exceeded",
        "operator-1",
    )
    assert (blocked["current_total"], blocked["report_candidates"], blocked["current_candidates"]) == (
        25,
        2,
        2,
    )
    assert w.runs()[0]["blocked_media_server_id"] == "mtx-b"


async def test_a_delete_goes_only_to_the_candidates_own_server() -> None:
    w = world("mtx-a", "mtx-b")
    device = uuid.uuid4()  # moved from mtx-a to mtx-b: the copy left on mtx-a is stale there
    await w.device(device, "site-1/cam", "enabled", server="mtx-a")
    await w.ownership("site-1/cam", device, server="mtx-a")
    await w.device(device, "site-1/cam", "enabled", server="mtx-b")
    await w.ownership("site-1/cam", device, server="mtx-b")
    w.servers["mtx-a"].paths |= {"site-1/cam", *(f"a-hand-{n}" for n in range(9))}
    w.servers["mtx-b"].paths |= {"site-1/cam"}
    result = await w.apply_report(await w.report())
    assert [(i.path, i.outcome) for i in result.items] == [(on("mtx-a", "site-1/cam"), "deleted")]
    assert w.servers["mtx-a"].delete_requests == ["site-1/cam"] and w.servers["mtx-b"].delete_requests == []
    assert "site-1/cam" in w.servers["mtx-b"].paths


async def test_a_candidate_on_a_server_no_longer_registered_blocks() -> None:
    w = world("mtx-a")
    await w.stale("cam", server="mtx-a")
    w.servers["mtx-a"].paths |= {"cam", *(f"hand-{n}" for n in range(9))}
    report = await w.report()
    moved = World({"mtx-b": MemoryMediaMtxPaths(["cam"])}, db=w.db)  # the operator removed mtx-a
    result = await moved.apply_report(report)
    assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.ENUMERATION_FAILED)
    assert w.servers["mtx-a"].delete_requests == []
