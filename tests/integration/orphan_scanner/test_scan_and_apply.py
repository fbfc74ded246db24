"""Report and apply end to end on real PostgreSQL, Kafka and a private MediaMTX."""

from __future__ import annotations

from orphan_scanner.domain.inputs import confirmation_text
from orphan_scanner.service_layer.apply import ApplyStatus
from tests.support.orphan_scanner_fixtures import Orphan, names


async def test_classes_are_exact_and_only_owned_stale_paths_are_deleted(orphan: Orphan) -> None:
    live = [f"live-{i}" for i in range(10)]
    stale = ["old-cam-1", "old-cam-2"]
    hand_made = [f"hand-{i}" for i in range(8)]
    for name in live:
        await orphan.feed.live(name)
    for name in stale:
        await orphan.feed.stale(name)
    await orphan.mediamtx.add_many(live + stale + hand_made)

    scan = await orphan.fresh_report()
    c = scan.classification
    assert names(c.in_use) == set(live)
    assert names(c.owned_stale) == set(stale)
    assert names(c.unowned) == set(hand_made)

    result = await orphan.components.use_cases.applier.apply(
        scan.scan_id, actor="alice", confirmation=confirmation_text(scan.scan_id, len(stale))
    )
    assert result.status is ApplyStatus.COMPLETED, result
    assert sorted((i.path.path_name, i.outcome) for i in result.items) == [(n, "deleted") for n in stale]
    assert await orphan.mediamtx.settled(set(live + hand_made)) == set(live + hand_made)

    again = await orphan.components.use_cases.applier.apply(
        scan.scan_id, actor="alice", confirmation=confirmation_text(scan.scan_id, len(stale))
    )
    assert again.status is ApplyStatus.COMPLETED
    assert sorted((i.path.path_name, i.outcome, i.earlier) for i in again.items) == [
        (n, "deleted", True) for n in stale
    ]
    assert await orphan.mediamtx.settled(set(live + hand_made)) == set(live + hand_made)


async def test_apply_records_runs_and_events(orphan: Orphan) -> None:
    await orphan.feed.stale("gone-1")
    await orphan.mediamtx.add_many(["gone-1", *[f"hand-{i}" for i in range(9)]])
    scan = await orphan.fresh_report()
    confirmation = confirmation_text(scan.scan_id, 1)
    await orphan.components.use_cases.applier.apply(scan.scan_id, actor="bob", confirmation=confirmation)
    async with orphan.pool.acquire() as conn:
        runs = await conn.fetch(f"SELECT status, deleted_count FROM {orphan.schema.name.quoted}.apply_runs")
        types = await conn.fetch(f"SELECT event_type FROM {orphan.schema.name.quoted}.outbox ORDER BY id")
    assert [(r["status"], r["deleted_count"]) for r in runs] == [("completed", 1)]
    assert [r["event_type"] for r in types] == ["ScanReported", "PathDisposed"]
