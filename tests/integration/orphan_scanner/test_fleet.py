"""orphan-scanner over several real MediaMTX servers: every server enumerated, each (server, path) classified
on its own, the gate computed per server, deletes only on the candidate's own server."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from orphan_scanner.domain.classify import ServerPath
from orphan_scanner.domain.errors import ScanError
from orphan_scanner.domain.gate import BlockReason
from orphan_scanner.service_layer.apply import ApplyStatus
from orphan_scanner.service_layer.metrics import ScanTrigger
from tests.conftest import MigratedSchema, Stack
from tests.integration.orphan_scanner.conftest import Orphan, orphan_harness
from tests.integration.orphan_scanner.private_mediamtx import PrivateMediaMtx, private_mediamtx
from yovision_platform.avro import AvroSerde

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


async def test_the_gate_is_computed_per_server_and_blocks_the_whole_batch(
    orphans: Orphan, fleet: dict[str, PrivateMediaMtx], serde: AvroSerde
) -> None:
    # 1 candidate among 20 paths of mtx-a is 5 %; 1 among the 5 paths of mtx-b is 20 %: blocked, naming mtx-b,
    # although the fleet-wide ratio (2 of 25, 8 %) would pass
    await orphans.feed.stale("a-stale", server="mtx-a")
    await orphans.feed.stale("b-stale", server="mtx-b")
    await fleet["mtx-a"].add_many(["a-stale", *[f"a-hand-{n}" for n in range(19)]])
    await fleet["mtx-b"].add_many(["b-stale", *[f"b-hand-{n}" for n in range(4)]])
    report = await orphans.fresh_report()
    assert set(report.classification.owned_stale) == {on("mtx-a", "a-stale"), on("mtx-b", "b-stale")}
    result = await orphans.apply_report(report)
    assert (result.status, result.reason_code) == (ApplyStatus.BLOCKED, BlockReason.RATIO_EXCEEDED)
    assert result.blocked_media_server_id == "mtx-b" and result.items == []
    assert "a-stale" in await fleet["mtx-a"].names() and "b-stale" in await fleet["mtx-b"].names()
    async with orphans.pool.acquire() as conn:
        value = await conn.fetchval(
            f"SELECT value FROM {orphans.schema.name.quoted}.outbox WHERE event_type = 'ApplyBlocked'"
        )
        blocked = await conn.fetchval(
            f"SELECT blocked_media_server_id FROM {orphans.schema.name.quoted}.apply_runs"
        )
    assert serde.decode(bytes(value)).record["media_server_id"] == "mtx-b" and blocked == "mtx-b"


async def test_a_server_that_cannot_be_enumerated_fails_the_whole_scan(
    stack: Stack,
    orphan_schema: MigratedSchema,
    orphan_pool: asyncpg.Pool,
    fleet: dict[str, PrivateMediaMtx],
    sense_topics: tuple[str, str],
    tmp_path: Path,
) -> None:
    broken = dict(fleet)
    broken["mtx-b"] = type(fleet["mtx-b"])(fleet["mtx-b"].sandbox)
    broken["mtx-b"].url = "http://127.0.0.1:9"  # registered, but unreachable
    async with orphan_harness(
        stack, orphan_schema, orphan_pool, fleet["mtx-a"], sense_topics, tmp_path, fleet=broken
    ) as harness:
        with pytest.raises(ScanError) as failed:
            await harness.components.scanner.scan(ScanTrigger.MANUAL)
        assert failed.value.code == "mediamtx_unreachable"
        await broken["mtx-b"].http.aclose()
