"""The metrics refresher on the fakes: apply totals and the last usable report's counts from the store, the
projection lag from the progress port (kept while Kafka cannot tell)."""

from __future__ import annotations

from tests.support.orphan_world import Options, World, world
from yovision_platform.observability import render_latest


def shown(w: World) -> dict[str, float]:
    lines = render_latest(w.registry)[0].decode().splitlines()
    return {
        name: float(value)
        for name, _, value in (line.rpartition(" ") for line in lines if line and not line.startswith("#"))
    }


async def test_totals_last_scan_and_lag_come_from_the_ports() -> None:
    w = world(paths=["stale-1", "stale-2", *(f"hand-{i}" for i in range(3))])
    for name in ("stale-1", "stale-2"):
        await w.stale(name)
    report = await w.report()
    await w.apply_report(report)  # 2 of 5: blocked
    w.progress.published = 7
    w.progress.applied = 4
    refresher = w.use_cases.metrics_refresher
    await refresher.refresh()
    values = shown(w)
    assert values["orphan_apply_blocked_total"] == 1
    assert values["orphan_paths_deleted_total"] == 0
    assert values['orphan_last_scan_paths{class="owned_stale",media_server="default"}'] == 2
    assert values["orphan_projection_lag_messages"] == 3

    w.progress.unavailable = True
    await refresher.refresh()
    assert shown(w)["orphan_projection_lag_messages"] == 3  # unknown: the last value stays


async def test_nothing_yet_reads_zero() -> None:
    w = world()
    await w.bootstrap(Options(projection_enabled=False)).metrics_refresher.refresh()
    values = shown(w)
    assert values["orphan_apply_blocked_total"] == 0
    assert values['orphan_last_scan_paths{class="observed",media_server="default"}'] == 0
