"""apply waits for the projection to reach Kafka's end offsets, and deletes nothing while it cannot.

(The target set only shrinking, partial failures and re-runs, crash recovery and one apply at a time are
use-case logic: tests/unit/orphan_scanner/test_apply_use_case.py on the fakes, whose ports
tests/ports/orphan_scanner proves equal to PostgreSQL and MediaMTX.)"""

from __future__ import annotations

import asyncio

from orphan_scanner.domain.gate import BlockReason
from orphan_scanner.service_layer.apply import ApplyResult, ApplyStatus
from tests.support.orphan_scanner_fixtures import OrphanFactory


def outcomes(result: ApplyResult) -> dict[str, str]:
    return {i.path.path_name: i.outcome for i in result.items if not i.earlier}


async def test_lagging_projection_blocks_apply_until_it_catches_up(orphan_with: OrphanFactory) -> None:
    async with orphan_with(catch_up_timeout_seconds=2.0) as orphan:
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
        orphan.components.use_cases.applier._catch_up_timeout = 20.0
        result = await orphan.apply_report(report)
        await restart
        assert result.status is ApplyStatus.COMPLETED
        assert outcomes(result) == {"stale-1": "skipped_not_stale", "stale-2": "deleted"}
        assert "stale-1" in await orphan.mediamtx.names()
