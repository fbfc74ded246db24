"""The scan on the fakes: classification per (server, path), the report and its event, the singleton lease
(one report per interval, a lost lease writes nothing, a held lease makes `report` wait), failed
enumerations and pruning. (Concurrent scanners and a paused process: tests/integration/orphan_scanner.)"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from orphan_scanner.adapters.memory import MemoryMediaMtxPaths
from orphan_scanner.domain.errors import ScanError, ScanFailed, ScanLeaseBusy, ScanNotUsable
from orphan_scanner.service_layer import scanner as scanner_module
from orphan_scanner.service_layer.apply import ApplyStatus
from orphan_scanner.service_layer.metrics import ScanTrigger
from orphan_scanner.service_layer.scanner import Scanner, ScanReport
from tests.support.orphan_world import World, names, on, world
from yovision_platform.observability import render_latest


def metric(w: World, line_start: str) -> float:
    text = render_latest(w.registry)[0].decode()
    (line,) = [line for line in text.splitlines() if line.startswith(line_start + " ")]
    return float(line.rsplit(" ", 1)[1])


def scans(w: World, trigger: str, result: str) -> float:
    return metric(w, f'orphan_scans_total{{result="{result}",trigger="{trigger}"}}')


async def test_classes_are_exact_and_the_report_is_stored_with_its_event() -> None:
    w = world(paths=["live-1", "stale-1", "hand-1", "hand-2"])
    await w.live("live-1")
    device = await w.stale("stale-1")
    report = await w.report()
    c = report.classification
    assert (names(c.in_use), names(c.owned_stale), names(c.unowned)) == (
        {"live-1"},
        {"stale-1"},
        {"hand-1", "hand-2"},
    )
    assert dict(c.owned_stale) == {on("default", "stale-1"): device}
    assert report.expires_at - report.created_at == timedelta(minutes=15)
    assert report.media_servers == ("default",)
    async with w.db as uow:
        stored = await uow.reports.load(report.scan_id)
    assert stored is not None and stored.status == "complete" and stored.candidates == dict(c.owned_stale)
    (event,) = w.events("ScanReported")
    assert (event["scan_id"], event["instance_id"], event["observed_total"]) == (
        str(report.scan_id),
        "scanner-1",
        4,
    )
    assert (event["in_use_count"], event["owned_stale_count"], event["unowned_count"]) == (1, 1, 2)
    assert w.mediamtx.delete_requests == []  # a scan never deletes


async def test_each_server_path_is_classified_on_its_own() -> None:
    w = world("mtx-a", "mtx-b")
    # a device moved from mtx-a to mtx-b: claimed on mtx-b; the copy left on mtx-a is stale there
    device = uuid.uuid4()
    await w.device(device, "site-1/cam", "enabled", server="mtx-a")
    await w.ownership("site-1/cam", device, server="mtx-a")
    await w.device(device, "site-1/cam", "enabled", server="mtx-b")
    await w.ownership("site-1/cam", device, server="mtx-b")
    # an event from before several servers claims its name everywhere; its evidence is on 'default'
    await w.device(uuid.uuid4(), "legacy/cam", "enabled")
    w.servers["mtx-a"].paths |= {"site-1/cam", "legacy/cam", *(f"a-hand-{n}" for n in range(8))}
    w.servers["mtx-b"].paths |= {"site-1/cam", "legacy/cam", "b-hand"}
    c = (await w.report()).classification
    assert c.in_use == {on("mtx-b", "site-1/cam"), on("mtx-a", "legacy/cam"), on("mtx-b", "legacy/cam")}
    assert dict(c.owned_stale) == {on("mtx-a", "site-1/cam"): device}
    assert c.unowned == {on("mtx-a", f"a-hand-{n}") for n in range(8)} | {on("mtx-b", "b-hand")}
    assert c.totals_by_server() == {"mtx-a": 10, "mtx-b": 3}
    (event,) = w.events("ScanReported")
    assert event["owned_stale_path_names"] == ["site-1/cam"]
    assert event["owned_stale_media_server_ids"] == ["mtx-a"]


async def test_two_scanners_produce_one_report_per_interval() -> None:
    w = world(paths=[f"hand-{i}" for i in range(5)])
    one, two = (w.new_scanner(f"scanner-{n}", interval_seconds=3600) for n in (1, 2))
    assert await one.scan(ScanTrigger.PERIODIC) is not None
    assert await two.scan(ScanTrigger.PERIODIC) is None  # not due again before the interval ends
    assert await one.scan(ScanTrigger.PERIODIC) is None
    assert len(w.db.reports.scans) == 1
    assert scans(w, "periodic", "complete") == 1
    assert await two.scan(ScanTrigger.MANUAL) is not None  # `report` does not wait for the interval


async def test_a_periodic_scan_is_due_again_after_the_interval() -> None:
    w = world(paths=["hand-1"])
    periodic = w.new_scanner("scanner-1", interval_seconds=1)
    assert await periodic.scan(ScanTrigger.PERIODIC) is not None
    w.db.clock.advance(timedelta(milliseconds=999))
    assert await periodic.scan(ScanTrigger.PERIODIC) is None  # not quite due
    w.db.clock.advance(timedelta(milliseconds=1))
    assert await periodic.scan(ScanTrigger.PERIODIC) is not None


class PausedPastTheLease(MemoryMediaMtxPaths):
    """Its first enumeration outlives the scan's lease: meanwhile the lease expires and another instance
    (`successor`) scans."""

    world: World
    successor: Scanner
    successor_report: ScanReport | None = None
    paused = False

    async def list_path_names(self) -> list[str]:
        if not self.paused:
            self.paused = True
            self.world.db.scan_lease.expire()
            self.successor_report = await self.successor.scan(ScanTrigger.MANUAL)
        return await super().list_path_names()


async def test_a_scanner_that_lost_its_lease_produces_no_usable_report() -> None:
    paused = PausedPastTheLease(["stale-1", *(f"hand-{i}" for i in range(9))], deadline_seconds=5.0)
    w = World({"default": paused})
    paused.world, paused.successor = w, w.new_scanner("successor")
    await w.stale("stale-1")
    with pytest.raises(ScanFailed) as lost:
        await w.scanner.scan(ScanTrigger.MANUAL)
    assert (lost.value.code, lost.value.status) == ("lease_lost", 503)
    assert paused.successor_report is not None
    assert list(w.db.reports.scans) == [paused.successor_report.scan_id]
    assert w.event_types() == ["ScanReported"]
    assert scans(w, "manual", "lease_lost") == 1


async def test_a_failed_enumeration_yields_a_report_apply_refuses() -> None:
    w = world(paths=["cam-1"])
    w.mediamtx.unreachable = True
    with pytest.raises(ScanFailed) as failed:
        await w.scanner.scan(ScanTrigger.MANUAL)
    assert failed.value.code == "mediamtx_unreachable"
    (scan_id,) = w.db.reports.scans
    async with w.db as uow:
        stored = await uow.reports.load(scan_id)
    assert stored is not None and (stored.status, stored.error_code) == ("failed", "mediamtx_unreachable")
    assert w.event_types() == []  # a failed scan is not published
    assert scans(w, "manual", "failed") == 1
    with pytest.raises(ScanNotUsable):
        await w.apply.apply(scan_id, actor="alice", confirmation="anything")
    w.mediamtx.unreachable = False
    assert await w.scanner.scan(ScanTrigger.MANUAL) is not None  # the failed scan released its lease


async def test_a_server_that_cannot_be_enumerated_fails_the_whole_scan() -> None:
    w = world("mtx-a", "mtx-b")
    w.servers["mtx-a"].paths |= {"cam-1"}
    w.servers["mtx-b"].unreachable = True
    with pytest.raises(ScanFailed) as failed:
        await w.report()
    assert failed.value.code == "mediamtx_unreachable"
    assert all(scan.status == "failed" for scan in w.db.reports.scans.values())


async def test_a_manual_report_gives_up_on_a_lease_held_too_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scanner_module, "MANUAL_SCAN_POLL_SECONDS", 0.001)
    w = world(paths=["cam-1"])
    async with w.db as uow:  # another instance's scan holds the lease (it never ends in this test)
        assert await uow.scan_lease.claim("holder", lease_seconds=60.0, due_only=False) is not None
    w.servers["default"].deadline_seconds = 0.01
    waiter = w.new_scanner("waiter", lease_seconds=0.02)  # gives up after lease + deadline
    with pytest.raises(ScanLeaseBusy) as busy:
        await waiter.scan(ScanTrigger.MANUAL)
    assert (busy.value.code, busy.value.status) == ("scan_lease_busy", 409)
    assert isinstance(busy.value, ScanError) and w.db.reports.scans == {}


async def test_a_manual_report_takes_the_lease_once_it_is_released(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scanner_module, "MANUAL_SCAN_POLL_SECONDS", 0.001)
    w = world(paths=["cam-1"])
    async with w.db as uow:
        lease = await uow.scan_lease.claim("holder", lease_seconds=60.0, due_only=False)
    assert lease is not None

    async def holder_finishes() -> None:  # runs while the manual scan waits between its tries
        async with w.db as uow:
            await uow.scan_lease.release(lease, next_scan_in_seconds=60.0)

    finishing = asyncio.create_task(holder_finishes())
    report = await w.scanner.scan(ScanTrigger.MANUAL)
    await finishing
    assert report is not None
    assert w.db.scan_lease.lease is None and w.db.scan_lease.next_scan_at is not None


async def test_a_periodic_scan_prunes_old_reports_no_apply_used() -> None:
    w = world(paths=["stale-1", *(f"hand-{i}" for i in range(9))])
    await w.stale("stale-1")
    used, unused = await w.report(), await w.report()
    assert set(w.db.reports.scans) == {used.scan_id, unused.scan_id}
    assert (await w.apply_report(used)).status is ApplyStatus.COMPLETED
    w.db.clock.advance(timedelta(hours=200))  # both are older than the retention, the next scan is due
    periodic = w.new_scanner("scanner-2", retention_hours=168)
    fresh = await periodic.scan(ScanTrigger.PERIODIC)
    assert fresh is not None
    assert set(w.db.reports.scans) == {used.scan_id, fresh.scan_id}


async def test_a_scan_sets_the_last_scan_metrics_per_server() -> None:
    w = world("mtx-a", "mtx-b")
    await w.stale("stale-1", server="mtx-a")
    w.servers["mtx-a"].paths |= {"stale-1", "hand-1"}
    await w.report()
    series = 'orphan_last_scan_paths{{class="{}",media_server="{}"}}'
    assert metric(w, series.format("observed", "mtx-a")) == 2
    assert metric(w, series.format("owned_stale", "mtx-a")) == 1
    assert metric(w, series.format("observed", "mtx-b")) == 0
    assert metric(w, "orphan_scan_seconds_count") == 1


def test_the_deadline_must_be_shorter_than_the_lease() -> None:
    w = world()
    with pytest.raises(ValueError, match="shorter than the scan lease"):
        w.new_scanner("x", lease_seconds=5.0)
