"""orphan-scanner over several real MediaMTX servers: every server enumerated, each (server, path) classified
on its own, deletes only on the candidate's own server. (The per-server gate and a server that cannot be
enumerated: tests/unit/orphan_scanner on the fakes.)"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from orphan_scanner.domain.classify import ServerPath
from orphan_scanner.service_layer.apply import ApplyStatus
from tests.support.orphan_scanner_fixtures import Orphan, orphan_harness
from tests.support.private_mediamtx import PrivateMediaMtx, private_mediamtx
from tests.support.stack import MigratedSchema, Stack
from yovision_platform.messaging import AvroSerde

SERVERS = ("mtx-a", "mtx-b")


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[dict[str, PrivateMediaMtx]]:
    async with contextlib.AsyncExitStack() as stack:
        yield {
            server: await stack.enter_async_context(private_mediamtx(tmp_path, label=server))
            for server in SERVERS
        }


@pytest.fixture
async def orphans(
    stack: Stack,
    orphan_schema: MigratedSchema,
    orphan_pool: asyncpg.Pool,
    fleet: dict[str, PrivateMediaMtx],
    sense_topics: tuple[str, str],
    tmp_path: Path,
) -> AsyncIterator[Orphan]:
    async with orphan_harness(
        stack, orphan_schema, orphan_pool, fleet["mtx-a"], sense_topics, tmp_path, fleet=fleet
    ) as harness:
        yield harness


def on(server: str, name: str) -> ServerPath:
    return ServerPath(server, name)


async def test_each_server_path_is_classified_on_its_own(
    orphans: Orphan, fleet: dict[str, PrivateMediaMtx], serde: AvroSerde
) -> None:
    # a device moved from mtx-a to mtx-b: claimed on mtx-b; the copy left on mtx-a is stale there
    device = uuid.uuid4()
    await orphans.feed.device(device, "site-1/cam", "enabled", server="mtx-a")
    await orphans.feed.ownership("site-1/cam", device, server="mtx-a")
    await orphans.feed.device(device, "site-1/cam", "enabled", server="mtx-b")
    await orphans.feed.ownership("site-1/cam", device, server="mtx-b")
    # an event from before several servers claims its name everywhere; its evidence is on 'default'
    legacy = uuid.uuid4()
    await orphans.feed.device(legacy, "legacy/cam", "enabled")
    await fleet["mtx-a"].add_many(["site-1/cam", "legacy/cam", *[f"a-hand-{n}" for n in range(8)]])
    await fleet["mtx-b"].add_many(["site-1/cam", "legacy/cam", "b-hand"])
    report = await orphans.fresh_report()
    c = report.classification
    assert c.in_use == {on("mtx-b", "site-1/cam"), on("mtx-a", "legacy/cam"), on("mtx-b", "legacy/cam")}
    assert dict(c.owned_stale) == {on("mtx-a", "site-1/cam"): device}
    assert c.unowned == {on("mtx-a", f"a-hand-{n}") for n in range(8)} | {on("mtx-b", "b-hand")}
    assert c.totals_by_server() == {"mtx-a": 10, "mtx-b": 3}
    async with orphans.pool.acquire() as conn:
        event = await conn.fetchval(
            f"SELECT value FROM {orphans.schema.name.quoted}.outbox WHERE event_type = 'ScanReported'"
        )
    record = serde.decode(bytes(event)).record
    assert record["owned_stale_path_names"] == ["site-1/cam"]
    assert record["owned_stale_media_server_ids"] == ["mtx-a"]
    result = await orphans.apply_report(report)
    assert result.status is ApplyStatus.COMPLETED
    assert [(i.path, i.outcome) for i in result.items] == [(on("mtx-a", "site-1/cam"), "deleted")]
    assert "site-1/cam" not in await fleet["mtx-a"].settled(set())
    assert "site-1/cam" in await fleet["mtx-b"].names()
