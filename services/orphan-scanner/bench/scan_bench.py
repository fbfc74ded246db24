"""Benchmark: orphan-scanner scans of a large MediaMTX and one full apply, against raw MediaMTX API calls.

    .venv/bin/python services/orphan-scanner/bench/scan_bench.py [--paths 10000] [--scans 10]

On the local stack (PostgreSQL and Kafka; `infra/scripts/stack.sh up pg kafka`): migrates a fresh schema
`bench_<hex>`, creates two Sense-shaped topics `bench.<hex>.device.v1` / `bench.<hex>.ownership.v1` (the
catalogue's partition counts) and starts private MediaMTX processes (.local/bin/mediamtx, only the Control
API, on a free loopback port) whose configuration file already holds the paths. The scanner, the apply
service and the projection worker are built exactly as the service builds them
(`entrypoints.main.build`, `entrypoints.projection_consumer.projection_consumer`), with the production
limits (MediaMTX deadline 20 s, scan lease 30 s, page size `LIST_PAGE_ITEMS`).

1. **projection ingest**: Sense-shaped events for every Sense path of both rounds (in_use:
   DeviceRegistered(enabled) + PathOwnershipRecorded; owned_stale: the same + DeviceDesiredStateChanged
   (disabled)) are produced first, then the real projection worker consumes them: events/s until its stored
   positions reach the end offsets (wall, consumer group join included) and between the first and the last
   processed event (steady state).
2. **scan**: a MediaMTX holding --paths paths (1% owned_stale, 60% in_use, the rest unowned); --scans manual
   scans one after another: scans/s, p50/p95/p99, paths classified/s and the share spent enumerating
   MediaMTX. Baseline: the same enumeration by a plain httpx paging loop (`LIST_PAGE_ITEMS` per page), once
   before and once after the scans; ratio = mean scan time / mean raw enumeration time. Reference only: the
   raw loop with 10x the page size, and one request for all paths.
3. **apply**: a MediaMTX with 1,280 paths, 128 of them owned_stale (the most the 10% gate allows), one
   report, one apply: deletes/s over the whole apply (catch-up, enumeration, classification, 128 deletes with
   their records and events), per-delete latency (the DELETE as the service sends it, and the whole per-item
   cycle). Baseline: 128 sequential httpx DELETEs of the same names on a second MediaMTX process with an
   identical configuration; ratio = apply deletes/s / raw deletes/s.

About 1.5 minutes with the defaults on 2 shared cores: scans 10 x ~1.4 s, deletes 2 x 128 x ~140 ms (MediaMTX
re-applies its whole configuration on every delete), projection ingest ~11 s.

Progress goes to stderr; stdout gets the tables and a last line `BENCH_JSON {...}`. At the end, also on
failure or Ctrl-C: the projection worker and the MediaMTX processes stop, the topics are deleted and the
schema and its roles dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import secrets
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from aiokafka import AIOKafkaProducer, TopicPartition

from orphan_scanner.domain import limits
from orphan_scanner.domain.inputs import confirmation_text
from orphan_scanner.entrypoints.main import SPEC, Components, build
from orphan_scanner.entrypoints.projection_consumer import projection_consumer
from orphan_scanner.service_layer.apply import ApplyStatus, Outcome
from orphan_scanner.service_layer.metrics import ScanTrigger
from orphan_scanner.service_layer.projection import OwnershipProjector
from orphan_scanner.service_layer.scanner import ScanReport
from orphan_scanner.settings import OrphanScannerSettings
from yovision_platform.localstack import LocalStack, runtime_dsn
from yovision_platform.mediamtx import LIST_PAGE_ITEMS, SINGLE_MEDIA_SERVER_ID, MediaFleet, MediaMtxApi
from yovision_platform.messaging import (
    AvroSerde,
    EventRecord,
    SchemaRegistry,
    build_event,
    catalog_for,
    fetch_end_offsets,
    start_producer,
    stored_positions,
)
from yovision_platform.settings import load_settings
from yovision_platform.storage import Identifier, SchemaPlan, drop, migrate
from yovision_platform.tools.bench_runner import run_cleanly
from yovision_platform.tools.localhost import write_private_file
from yovision_platform.tools.mediamtx_sandbox import MediaMtxSandbox, mediamtx_sandbox

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the platform benchmarks' package (bench/)
from bench.infra import stack_topics  # topics replicated as the stack's

REPO_ROOT = Path(__file__).resolve().parents[3]
MEDIAMTX_BIN = REPO_ROOT / ".local/bin/mediamtx"
RAW_HTTP_TIMEOUT_SECONDS = 60.0
INGEST_TIMEOUT_SECONDS = 300.0  # the bench fails rather than hangs
POLL_SECONDS = 0.05
STALE_PERCENT = 1  # scan round: owned_stale share of the configured paths
IN_USE_PERCENT = 60  # both rounds: in_use share; the rest is unowned
# Apply round: the most candidates one apply may delete, and the fewest paths the 10% gate then needs.
APPLY_CANDIDATES = limits.APPLY_MAX_CANDIDATES
APPLY_TOTAL_PATHS = APPLY_CANDIDATES * limits.DELETE_RATIO_DENOMINATOR // limits.DELETE_RATIO_NUMERATOR
ACTOR = "bench"
# Reference only (besides one request for all paths): the raw loop with 10x the client's page size.
REFERENCE_PAGE_ITEMS = 10 * LIST_PAGE_ITEMS
MS_PER_SECOND = 1000.0
# The speed of what the service drives (issue 25): a scan adds little to its enumeration; an apply adds two
# short transactions (the attempting record, then the outcome with its event) to each ~130 ms delete.
GOAL_SCAN_VS_RAW = 1.2
GOAL_APPLY_VS_RAW = 0.9
# The local stack's issuer (`make up`): the settings require one for the read API, which the bench does not
# serve, so no token is verified and nothing is fetched from it.
LOCAL_ISSUER = "http://127.0.0.1:14444"


def progress(message: str) -> None:
    print(f"[scan_bench {datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def percentile(sorted_samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted samples (as bench/stats.py)."""
    if not sorted_samples:
        return 0.0
    return sorted_samples[max(1, math.ceil(fraction * len(sorted_samples))) - 1]


def latency_ms(seconds: Sequence[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "count": len(ordered),
        "p50": percentile(ordered, 0.50) * MS_PER_SECOND,
        "p95": percentile(ordered, 0.95) * MS_PER_SECOND,
        "p99": percentile(ordered, 0.99) * MS_PER_SECOND,
        "max": (ordered[-1] if ordered else 0.0) * MS_PER_SECOND,
        "mean": (sum(ordered) / len(ordered) if ordered else 0.0) * MS_PER_SECOND,
    }


# --- workload ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """The configured paths of one MediaMTX and the class each must get."""

    names: list[str]
    stale: list[str]
    in_use: list[str]

    @classmethod
    def spread(cls, prefix: str, total: int, stale: int) -> Workload:
        names = [f"{prefix}-{n:06d}" for n in range(total)]
        stale_names = [names[n * total // stale] for n in range(stale)]
        chosen = set(stale_names)
        rest = [name for name in names if name not in chosen]
        return cls(names, stale_names, rest[: total * IN_USE_PERCENT // 100])

    @property
    def unowned_count(self) -> int:
        return len(self.names) - len(self.stale) - len(self.in_use)


class SenseFeed:
    """Sense-shaped events (Sense's catalogue contracts, source `sense`) for a workload, produced in bulk."""

    def __init__(self, producer: AIOKafkaProducer, serde: AvroSerde, topics: tuple[str, str]) -> None:
        self._producer = producer
        self._serde = serde
        self._device_topic, self._ownership_topic = topics

    async def publish(self, workload: Workload) -> int:
        """Send every event of `workload`, then await all acknowledgements; returns the number of events."""
        acks: list[asyncio.Future[Any]] = []
        stale = set(workload.stale)
        for path in workload.in_use + workload.stale:
            device_id = uuid.uuid4()
            events = [self._device(device_id, path, "enabled", 1), self._ownership(path, device_id)]
            if path in stale:
                events.append(self._device(device_id, path, "disabled", 2))
            for topic, event in events:
                acks.append(await self._producer.send(topic, event.value, key=event.key))
        await asyncio.gather(*acks)
        return len(acks)

    def _device(self, device_id: uuid.UUID, path: str, state: str, version: int) -> tuple[str, EventRecord]:
        payload: dict[str, object] = {
            "device_id": str(device_id),
            "tenant_id": "tenant-bench",
            "site_id": "site-1",
            "name": f"camera {path}",
            "path_name": path,
            "desired_state": state,
            "config_version": version,
        }
        event_type = "DeviceRegistered"
        if version > 1:
            event_type = "DeviceDesiredStateChanged"
            payload["previous_desired_state"] = "enabled"
        return self._device_topic, build_event(self._serde, event_type, str(device_id), payload, "sense")

    def _ownership(self, path: str, device_id: uuid.UUID) -> tuple[str, EventRecord]:
        now = datetime.now(UTC)
        payload = {
            "path_name": path,
            "device_id": str(device_id),
            "tenant_id": "tenant-bench",
            "site_id": "site-1",
            "first_seen_at": now,
            "last_seen_at": now,
        }
        return self._ownership_topic, build_event(
            self._serde, "PathOwnershipRecorded", path, payload, "sense"
        )


# --- MediaMTX ----------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def mediamtx_process(
    work_dir: Path, label: str, paths: Sequence[str]
) -> AsyncIterator[MediaMtxSandbox]:
    """A private MediaMTX (authenticated API) whose configuration file holds `paths`."""
    async with mediamtx_sandbox(MEDIAMTX_BIN, work_dir, label=label, preload=paths) as sandbox:
        yield sandbox


class TimedMediaMtxApi(MediaMtxApi):
    """The shipped client, unchanged, with the (start, end) perf_counter times of every enumeration and
    every delete recorded (instrumentation only)."""

    def __init__(self, sandbox: MediaMtxSandbox, *, deadline_seconds: float) -> None:
        super().__init__(sandbox.url, deadline_seconds=deadline_seconds, credentials=sandbox.credentials)
        self.lists: list[tuple[float, float]] = []
        self.deletes: list[tuple[float, float]] = []

    async def list_path_names(self) -> list[str]:
        started = time.perf_counter()
        try:
            return await super().list_path_names()
        finally:
            self.lists.append((started, time.perf_counter()))

    async def delete_path(self, name: str) -> bool:
        started = time.perf_counter()
        try:
            return await super().delete_path(name)
        finally:
            self.deletes.append((started, time.perf_counter()))


async def raw_enumerate(sandbox: MediaMtxSandbox, page_items: int) -> tuple[int, float]:
    """Baseline: every configured path name by a plain httpx paging loop; returns (names, seconds)."""
    async with httpx.AsyncClient(
        base_url=sandbox.url, timeout=RAW_HTTP_TIMEOUT_SECONDS, auth=sandbox.auth()
    ) as http:
        names: set[str] = set()
        started = time.perf_counter()
        page = 0
        while True:
            response = await http.get(
                "/v3/config/paths/list", params={"page": page, "itemsPerPage": page_items}
            )
            response.raise_for_status()
            body = response.json()
            names.update(item["name"] for item in body["items"])
            page += 1
            if page >= body["pageCount"] or not body["items"]:
                return len(names), time.perf_counter() - started


async def raw_deletes(sandbox: MediaMtxSandbox, names: Sequence[str]) -> list[float]:
    """Baseline: one plain httpx DELETE per name, sequentially; returns seconds per delete."""
    seconds: list[float] = []
    async with httpx.AsyncClient(
        base_url=sandbox.url, timeout=RAW_HTTP_TIMEOUT_SECONDS, auth=sandbox.auth()
    ) as http:
        for name in names:
            started = time.perf_counter()
            response = await http.delete(f"/v3/config/paths/delete/{name}")
            seconds.append(time.perf_counter() - started)
            response.raise_for_status()
    return seconds


async def path_count(sandbox: MediaMtxSandbox) -> int:
    async with httpx.AsyncClient(
        base_url=sandbox.url, timeout=RAW_HTTP_TIMEOUT_SECONDS, auth=sandbox.auth()
    ) as http:
        response = await http.get("/v3/config/paths/list", params={"itemsPerPage": 1})
        response.raise_for_status()
        return int(response.json()["itemCount"])


# --- the bench ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchContext:
    stack: LocalStack
    schema: Identifier
    pool: asyncpg.Pool
    admin: asyncpg.Connection
    dsn_file: Path
    work_dir: Path
    topics: tuple[str, str]
    consumer_group: str

    def settings(self, mediamtx_url: str) -> OrphanScannerSettings:
        """The service's settings with production limits; only the bench's schema, topics and MediaMTX."""
        return load_settings(
            OrphanScannerSettings,
            database_dsn_file=self.dsn_file,
            kafka_bootstrap=self.stack.kafka_bootstrap,
            mediamtx_api_url=mediamtx_url,
            device_topic=self.topics[0],
            ownership_topic=self.topics[1],
            consumer_group=self.consumer_group,
            outbox_relay_enabled=False,
            auth_issuer=LOCAL_ISSUER,
        )

    def components(self, sandbox: MediaMtxSandbox) -> tuple[Components, TimedMediaMtxApi]:
        settings = self.settings(sandbox.url)
        api = TimedMediaMtxApi(sandbox, deadline_seconds=settings.mediamtx_deadline_seconds)
        fleet = MediaFleet({SINGLE_MEDIA_SERVER_ID: api})
        return build(self.pool, self.schema, settings, client_id="orphan-bench", fleet=fleet), api


def start_projection(ctx: BenchContext, serde: AvroSerde, stop: asyncio.Event) -> asyncio.Task[None]:
    """The real projection worker, as `serve` runs it, on the bench's schema, topics and group."""
    consumer = projection_consumer(
        ctx.pool, ctx.schema, serde, OwnershipProjector(), consumer_group=ctx.consumer_group
    )
    return asyncio.create_task(
        consumer.consume_topics(
            ctx.stack.kafka_bootstrap, ctx.topics, stop, client_id="orphan-bench-projection"
        )
    )


async def wait_caught_up(
    ctx: BenchContext, ends: dict[TopicPartition, int], projection: asyncio.Task[None], started: float
) -> dict[str, Any]:
    """Wait until the projection's stored positions reach `ends`; ingest figures since `started`."""
    produced = sum(ends.values())
    while True:
        positions = await stored_positions(ctx.admin, ctx.schema, ctx.consumer_group)
        if all(positions.get(tp, 0) >= end for tp, end in ends.items()):
            break
        if projection.done():
            projection.result()
            raise RuntimeError("the projection worker stopped")
        if time.perf_counter() - started > INGEST_TIMEOUT_SECONDS:
            raise RuntimeError(f"the projection did not catch up in {INGEST_TIMEOUT_SECONDS} s")
        await asyncio.sleep(POLL_SECONDS)
    wall = time.perf_counter() - started
    s = ctx.schema.quoted
    row = await ctx.admin.fetchrow(
        f"SELECT count(*) AS n, extract(epoch FROM max(processed_at) - min(processed_at)) AS span "
        f"FROM {s}.processed_events"
    )
    dead = await ctx.admin.fetchval(f"SELECT count(*) FROM {s}.consumer_dead_letters")
    assert row is not None
    if row["n"] != produced or dead:
        raise RuntimeError(f"projection applied {row['n']} of {produced} events, {dead} dead-lettered")
    return {
        "events": produced,
        "wall_s": wall,
        "events_per_s_wall": produced / wall,
        "events_per_s_steady": produced / float(row["span"]) if row["span"] else 0.0,
    }


def check_classes(report: ScanReport, workload: Workload) -> None:
    c = report.classification
    got = (len(c.in_use), len(c.owned_stale), len(c.unowned))
    want = (len(workload.in_use), len(workload.stale), workload.unowned_count)
    if got != want:
        raise RuntimeError(f"scan classified (in_use, owned_stale, unowned) = {got}, expected {want}")


async def scan_round(ctx: BenchContext, workload: Workload, scans: int) -> dict[str, Any]:
    total = len(workload.names)
    async with mediamtx_process(ctx.work_dir, "scan", workload.names) as url:
        components, api = ctx.components(url)
        try:
            progress(f"scan: raw enumeration of {total:,} paths ({LIST_PAGE_ITEMS} per page)")
            raw = [await raw_enumerate(url, LIST_PAGE_ITEMS)]
            seconds: list[float] = []
            for n in range(scans):
                started = time.perf_counter()
                report = await components.use_cases.scanner.scan(ScanTrigger.MANUAL)
                seconds.append(time.perf_counter() - started)
                if report is None:
                    raise RuntimeError("a manual scan returned no report")
                check_classes(report, workload)
                progress(f"scan {n + 1}/{scans}: {seconds[-1]:.2f} s")
            raw.append(await raw_enumerate(url, LIST_PAGE_ITEMS))
            references = {size: await raw_enumerate(url, size) for size in (REFERENCE_PAGE_ITEMS, total)}
        finally:
            await components.fleet.aclose()
    if any(count != total for count, _ in [*raw, *references.values()]):
        raise RuntimeError("a raw enumeration missed paths")
    raw_mean = sum(s for _, s in raw) / len(raw)
    scan_mean = sum(seconds) / len(seconds)
    enumerate_s = [end - start for start, end in api.lists]
    # What a scan adds to its own enumeration: lease claim, projection reads, classification, report write.
    rest_s = [scan - listing for scan, listing in zip(seconds, enumerate_s, strict=True)]
    return {
        "paths": total,
        "in_use": len(workload.in_use),
        "owned_stale": len(workload.stale),
        "unowned": workload.unowned_count,
        "scans": scans,
        "page_items": LIST_PAGE_ITEMS,
        "scans_per_s": scans / sum(seconds),
        "scan_ms": latency_ms(seconds),
        "paths_per_s": total / scan_mean,
        "enumerate_share": sum(enumerate_s) / sum(seconds),
        "scan_enumerate_ms_mean": sum(enumerate_s) / len(enumerate_s) * MS_PER_SECOND,
        "scan_rest_ms": latency_ms(rest_s),
        "rest_paths_per_s": total * len(rest_s) / sum(rest_s),
        "raw_enumerate_ms": [s * MS_PER_SECOND for _, s in raw],
        "raw_reference_ms": {str(size): s * MS_PER_SECOND for size, (_, s) in references.items()},
        "ratio_scan_vs_raw": scan_mean / raw_mean,
    }


async def apply_round(ctx: BenchContext, workload: Workload) -> dict[str, Any]:
    total, candidates = len(workload.names), len(workload.stale)
    async with (
        mediamtx_process(ctx.work_dir, "apply", workload.names) as url,
        mediamtx_process(ctx.work_dir, "raw", workload.names) as raw_url,
    ):
        components, api = ctx.components(url)
        try:
            report = await components.use_cases.scanner.scan(ScanTrigger.MANUAL)
            if report is None:
                raise RuntimeError("a manual scan returned no report")
            check_classes(report, workload)
            progress(f"apply: raw baseline, {candidates} sequential DELETEs ({total:,} paths)")
            raw_seconds = await raw_deletes(raw_url, workload.stale)
            progress(f"apply: {candidates} candidates of {total:,} paths")
            confirmation = confirmation_text(report.scan_id, candidates)
            api.lists.clear()
            started = time.perf_counter()
            result = await components.use_cases.applier.apply(
                report.scan_id, actor=ACTOR, confirmation=confirmation
            )
            finished = time.perf_counter()
        finally:
            await components.fleet.aclose()
        left = (await path_count(url), await path_count(raw_url))
    if result.status is not ApplyStatus.COMPLETED or result.counts() != {Outcome.DELETED: candidates}:
        raise RuntimeError(f"apply: {result.status} {result.reason_code} {result.counts()}")
    if left != (total - candidates, total - candidates):
        raise RuntimeError(f"paths left (apply, raw) = {left}, expected {total - candidates}")
    wall = finished - started
    deletes = api.deletes
    list_start, list_end = api.lists[0]
    raw_rate = candidates / sum(raw_seconds)
    return {
        "paths": total,
        "candidates": candidates,
        "apply_s": wall,
        "deletes_per_s": candidates / wall,
        "delete_loop_deletes_per_s": candidates / (deletes[-1][1] - deletes[0][0]),
        "phases_ms": {
            "lock_load_catch_up": (list_start - started) * MS_PER_SECOND,
            "enumerate": (list_end - list_start) * MS_PER_SECOND,
            "classify_gate_start": (deletes[0][0] - list_end) * MS_PER_SECOND,
            "delete_loop": (deletes[-1][1] - deletes[0][0]) * MS_PER_SECOND,
            "finish": (finished - deletes[-1][1]) * MS_PER_SECOND,
        },
        "delete_call_ms": latency_ms([end - start for start, end in deletes]),
        "item_cycle_ms": latency_ms([b[0] - a[0] for a, b in itertools.pairwise(deletes)]),
        "raw_deletes_per_s": raw_rate,
        "raw_delete_ms": latency_ms(raw_seconds),
        "ratio_apply_vs_raw": (candidates / wall) / raw_rate,
    }


async def bench(stack: LocalStack, paths: int, scans: int) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:10]
    plan = SchemaPlan.for_service(Identifier(f"bench_{tag}"), SPEC.migrations_dir)
    password = secrets.token_urlsafe(16)
    serde = AvroSerde(SchemaRegistry.load())
    catalog = catalog_for(serde)
    topics = (f"bench.{tag}.device.v1", f"bench.{tag}.ownership.v1")
    partitions = {
        topics[0]: catalog.topics["sense.device.v1"].partitions,
        topics[1]: catalog.topics["sense.path-ownership.v1"].partitions,
    }
    scan_load = Workload.spread("cam", paths, max(1, paths * STALE_PERCENT // 100))
    apply_load = Workload.spread("apply", APPLY_TOTAL_PATHS, APPLY_CANDIDATES)
    results: dict[str, Any] = {}
    stop = asyncio.Event()
    projection: asyncio.Task[None] | None = None
    topics_created = False
    admin = await asyncpg.connect(stack.admin_dsn)
    try:
        with tempfile.TemporaryDirectory(prefix="orphan-bench-") as work:
            work_dir = Path(work)
            await migrate(admin, plan, runtime_password=password)
            topics_created = True  # before: a partial creation is cleaned up too (deletion errors ignored)
            await stack_topics(stack.kafka_bootstrap, partitions, create=True)
            dsn = runtime_dsn(stack.admin_dsn, plan.runtime_role, password)
            pool = await asyncpg.create_pool(dsn, min_size=2, max_size=8)
            assert pool is not None
            ctx = BenchContext(
                stack,
                plan.schema,
                pool,
                admin,
                write_private_file(work_dir / "runtime.dsn", dsn + "\n"),
                work_dir,
                topics,
                f"bench-orphan-{tag}",
            )
            try:
                producer = await start_producer(stack.kafka_bootstrap, client_id="orphan-bench-feed")
                try:
                    started = time.perf_counter()
                    feed = SenseFeed(producer, serde, topics)
                    produced = await feed.publish(scan_load) + await feed.publish(apply_load)
                    progress(f"produced {produced:,} Sense events in {time.perf_counter() - started:.1f} s")
                finally:
                    await producer.stop()
                ends = await fetch_end_offsets(stack.kafka_bootstrap, topics, client_id="orphan-bench-ends")
                if sum(ends.values()) != produced:
                    raise RuntimeError(f"the topics hold {sum(ends.values())} events, {produced} produced")
                started = time.perf_counter()
                projection = start_projection(ctx, serde, stop)
                results["ingest"] = await wait_caught_up(ctx, ends, projection, started)
                progress(f"projection caught up: {results['ingest']['wall_s']:.1f} s")
                results["scan"] = await scan_round(ctx, scan_load, scans)
                results["apply"] = await apply_round(ctx, apply_load)
            finally:
                stop.set()
                if projection is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(projection, 30)
                await pool.close()
    finally:
        if topics_created:
            with contextlib.suppress(Exception):
                await stack_topics(stack.kafka_bootstrap, partitions, create=False)
        await drop(admin, plan)
        await admin.close()
    return results


# --- output ------------------------------------------------------------------------------------------------


def table(title: str, headers: Sequence[str], rows: Sequence[dict[str, str]]) -> str:
    """A title, a header row and right-aligned columns (the first left-aligned); a row's missing cells
    are blank."""
    cells = [[row.get(h, "") for h in headers] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]

    def line(texts: Sequence[str]) -> str:
        first, *rest = texts
        return "  ".join(
            [first.ljust(widths[0]), *(t.rjust(w) for t, w in zip(rest, widths[1:], strict=True))]
        )

    return "\n".join([title, line(headers), line(["-" * w for w in widths]), *map(line, cells), ""])


def ms_cols(ms: dict[str, float]) -> dict[str, str]:
    return {f"{k} ms": f"{ms[k]:,.1f}" for k in ("p50", "p95", "p99", "max")}


def reference_label(page_items: int, paths: int) -> str:
    if page_items >= paths:
        return "reference: one request for all paths"
    return f"reference: raw loop, {page_items:,} per page"


def goal_lines(scan: dict[str, Any], apply: dict[str, Any]) -> list[str]:
    """The service at the speed of the MediaMTX it drives: a scan's time against the raw enumeration, an
    apply's deletes against raw sequential deletes."""
    scan_ratio, apply_ratio = scan["ratio_scan_vs_raw"], apply["ratio_apply_vs_raw"]
    return [
        f"goal: scan time <= {GOAL_SCAN_VS_RAW}x raw enumeration -> {scan_ratio:.2f}x: "
        f"{'met' if scan_ratio <= GOAL_SCAN_VS_RAW else 'NOT met'}",
        f"goal: apply >= {GOAL_APPLY_VS_RAW} of raw deletes/s -> {apply_ratio:.2f}: "
        f"{'met' if apply_ratio >= GOAL_APPLY_VS_RAW else 'NOT met'}",
    ]


def report(results: dict[str, Any]) -> None:
    ingest, scan, apply = results["ingest"], results["scan"], results["apply"]
    print(
        table(
            f"Projection ingest: {ingest['events']:,} Sense events through the real projection worker",
            ["measure", "events/s", "seconds"],
            [
                {
                    "measure": "until caught up (group join included)",
                    "events/s": f"{ingest['events_per_s_wall']:,.0f}",
                    "seconds": f"{ingest['wall_s']:.2f}",
                },
                {
                    "measure": "steady (first to last processed event)",
                    "events/s": f"{ingest['events_per_s_steady']:,.0f}",
                },
            ],
        )
    )
    raw_mean = sum(scan["raw_enumerate_ms"]) / len(scan["raw_enumerate_ms"])

    def single(run: str, ms: float, ratio: bool = True) -> dict[str, str]:
        row = {"run": run, "runs": "1", "mean ms": f"{ms:,.1f}"}
        row["paths/s"] = f"{scan['paths'] * MS_PER_SECOND / ms:,.0f}"
        if ratio:
            row["time vs raw"] = f"{ms / raw_mean:.2f}"
        return row

    before, after = scan["raw_enumerate_ms"]
    print(
        table(
            f"Scan: {scan['paths']:,} paths ({scan['in_use']:,} in_use, {scan['owned_stale']:,} owned_stale, "
            f"{scan['unowned']:,} unowned), {scan['page_items']} per page; time vs raw = time / raw mean",
            ["run", "runs", "mean ms", "p50 ms", "p95 ms", "p99 ms", "max ms", "paths/s", "time vs raw"],
            [
                {
                    "run": "Scanner.scan(MANUAL), one after another",
                    "runs": str(scan["scans"]),
                    "mean ms": f"{scan['scan_ms']['mean']:,.1f}",
                    **ms_cols(scan["scan_ms"]),
                    "paths/s": f"{scan['paths_per_s']:,.0f}",
                    "time vs raw": f"{scan['ratio_scan_vs_raw']:.2f}",
                },
                single("raw httpx paging loop, before the scans", before),
                single("raw httpx paging loop, after the scans", after),
                *(
                    single(reference_label(int(size), scan["paths"]), ms, ratio=False)
                    for size, ms in scan["raw_reference_ms"].items()
                ),
            ],
        )
    )
    rest = scan["scan_rest_ms"]
    print(
        f"scans/s: {scan['scans_per_s']:.3f}; "
        f"share of scan time in MediaMtxApi.list_path_names: {scan['enumerate_share']:.1%} "
        f"(mean {scan['scan_enumerate_ms_mean']:,.0f} ms per scan)\n"
        "scan minus its own enumeration (lease, projection reads, classification, report write): "
        f"p50 {rest['p50']:,.1f} ms, max {rest['max']:,.1f} ms = {scan['rest_paths_per_s']:,.0f} paths/s\n"
    )
    print(
        table(
            f"Apply: {apply['candidates']} owned_stale candidates of {apply['paths']:,} paths, one apply",
            ["run", "deletes/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "rate vs raw"],
            [
                {
                    "run": "apply, whole run",
                    "deletes/s": f"{apply['deletes_per_s']:.1f}",
                    "rate vs raw": f"{apply['ratio_apply_vs_raw']:.2f}",
                },
                {
                    "run": "apply, per-item cycle (records + event)",
                    "deletes/s": f"{apply['delete_loop_deletes_per_s']:.1f}",
                    **ms_cols(apply["item_cycle_ms"]),
                },
                {"run": "apply, DELETE call (MediaMtxApi)", **ms_cols(apply["delete_call_ms"])},
                {
                    "run": "raw httpx DELETE, sequential",
                    "deletes/s": f"{apply['raw_deletes_per_s']:.1f}",
                    **ms_cols(apply["raw_delete_ms"]),
                    "rate vs raw": "1.00",
                },
            ],
        )
    )
    phases = ", ".join(f"{name} {ms:,.0f} ms" for name, ms in apply["phases_ms"].items())
    print(f"apply phases: {phases}\n")
    for line in goal_lines(scan, apply):
        print(line)
    print("BENCH_JSON " + json.dumps({"bench": "orphan_scan", **results}, sort_keys=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--paths", type=int, default=10_000, help="configured MediaMTX paths for the scans")
    parser.add_argument("--scans", type=int, default=10, help="manual scans, one after another")
    parser.add_argument("--stack-dir", type=Path, default=REPO_ROOT / ".local", help="the stack's .local")
    args = parser.parse_args()
    if args.paths < 100 or args.scans < 1:
        parser.error("--paths must be >= 100 and --scans >= 1")
    report(run_cleanly(bench(LocalStack.load(args.stack_dir), args.paths, args.scans)))


if __name__ == "__main__":
    main()
