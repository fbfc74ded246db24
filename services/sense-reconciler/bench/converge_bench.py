"""Benchmark: devices enabled through the Control API until their MediaMTX path is configured.

    .venv/bin/python services/sense-reconciler/bench/converge_bench.py [--devices 1000]

Migrates a fresh schema `bench_<hex>` on the local stack, serves the Control API in process (ASGI) and runs
one Reconciler owning every partition, against the real MediaMTX. Each API call wakes the loop (what the
device event does in production); the scan interval is 50 ms. Latency per device = DB-clock time from its
creation (inside the API call's transaction) to the completion of its reconcile (`last_result_at`), i.e. the
path was added. Prints devices converged per second and p50/p99 latency (goal p99 <= 1 s), then deletes the
paths and drops the schema.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import statistics
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
from prometheus_client import CollectorRegistry

from sense_reconciler.adapters.device_repository import DeviceRepository
from sense_reconciler.adapters.mediamtx import MediaMtxClient
from sense_reconciler.entrypoints.api import install
from sense_reconciler.entrypoints.main import SPEC
from sense_reconciler.service_layer.devices import DeviceService
from sense_reconciler.service_layer.metrics import ReconcileMetrics
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.reconciler import Reconciler
from sense_reconciler.service_layer.source_uris import SourceUris
from yovision_platform.auth import StaticBearerToken
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.db import Identifier
from yovision_platform.encryption import EncryptionKeyRing
from yovision_platform.localstack import LocalStack, runtime_dsn
from yovision_platform.migrations import SchemaPlan, drop, migrate
from yovision_platform.tools.bench_runner import run_cleanly
from yovision_platform.web import create_app

REPO_ROOT = Path(__file__).resolve().parents[3]
PARTITIONS = 12
DEVICES_PER_SITE = 16  # the default per-site limit of enabled devices
TOKEN = secrets.token_hex(24)
CLEANUP_ROUNDS = 5


async def bench(devices: int) -> None:
    stack = LocalStack.load(REPO_ROOT / ".local")
    schema = Identifier(f"bench_{uuid.uuid4().hex[:10]}")
    password = secrets.token_urlsafe(16)
    plan = SchemaPlan.for_service(schema, SPEC.migrations_dir)
    admin = await asyncpg.connect(stack.admin_dsn)
    try:
        await migrate(admin, plan, runtime_password=password)
        raw_rate = await raw_mediamtx_adds(stack.mediamtx_api_url, devices)
        print(f"baseline: raw sequential MediaMTX path adds: {raw_rate:.1f}/s ({devices} paths)")
        rate = await run(stack, schema, runtime_dsn(stack.admin_dsn, plan.runtime_role, password), devices)
        print(f"reconciler vs raw MediaMTX adds: {rate / raw_rate:.2f}")
    finally:
        await drop(admin, plan)
        await admin.close()


async def raw_mediamtx_adds(api_url: str, count: int) -> float:
    """Baseline in the same run: `count` plain sequential path adds (then deletes); returns adds/second.

    MediaMTX rewrites its whole path configuration on every add, so one add costs more the more paths
    exist: this is the ceiling any reconciler of one MediaMTX instance works under."""
    prefix = f"bench-raw-{uuid.uuid4().hex[:6]}"
    try:
        async with httpx.AsyncClient(base_url=api_url, timeout=30) as client:
            started = time.monotonic()
            for n in range(count):
                body = {"source": f"rtsp://127.0.0.1:1/{prefix}-{n}", "sourceOnDemand": True}
                (await client.post(f"/v3/config/paths/add/{prefix}-{n}", json=body)).raise_for_status()
            return count / (time.monotonic() - started)
    finally:
        await delete_paths_with_prefix(api_url, prefix)


async def delete_paths_with_prefix(api_url: str, prefix: str) -> int:
    """Delete every MediaMTX path whose name starts with `prefix` (what a run created, however far it
    got), re-listing until none is left; returns how many were deleted."""
    mediamtx = MediaMtxClient(api_url, deadline_seconds=30.0)
    deleted = 0
    try:
        for _ in range(CLEANUP_ROUNDS):
            left = [name for name in await mediamtx.list_path_names() if name.startswith(prefix)]
            if not left:
                return deleted
            for name in left:
                with contextlib.suppress(Exception):  # the next round lists what is still there
                    await mediamtx.delete_path(name)
                    deleted += 1
        raise RuntimeError(f"paths with prefix {prefix} are still configured after cleanup")
    finally:
        await mediamtx.aclose()


async def wait_converged(pool: asyncpg.Pool, schema: Identifier) -> None:
    query = f"SELECT count(*) FROM {schema.quoted}.reconcile_state WHERE status <> 'converged'"
    while await pool.fetchval(query):  # noqa: ASYNC110 - polling the database
        await asyncio.sleep(0.05)


async def run(stack: LocalStack, schema: Identifier, dsn: str, devices: int) -> float:
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=6)
    assert pool is not None
    serde = AvroSerde(SchemaRegistry.load())
    sources = SourceUris(EncryptionKeyRing({"bench": os.urandom(32)}, "bench"))
    service = DeviceService(
        pool, DeviceRepository(schema), serde, device_topic="sense.device.v1", partitions=12, sources=sources
    )
    mediamtx = MediaMtxClient(stack.mediamtx_api_url)
    owned = OwnedPartitions("sense.device.v1")
    owned.assign(range(PARTITIONS))
    metrics = ReconcileMetrics(CollectorRegistry())
    worker = Reconciler(
        pool,
        schema,
        mediamtx,
        owned,
        metrics,
        serde,
        owner="bench",
        sources=sources,
        batch=128,
        scan_interval_seconds=0.05,
    )
    app = create_app("sense-reconciler-bench", "0")
    install(app, service, StaticBearerToken(TOKEN))
    stop = asyncio.Event()
    loop_task = asyncio.create_task(worker.run(stop))
    prefix = f"bench-{uuid.uuid4().hex[:6]}"
    paths = [f"{prefix}-{n}" for n in range(devices)]
    try:
        started = time.monotonic()
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://bench", headers=headers) as api:
            for n, path in enumerate(paths):
                body = {
                    "tenant_id": "bench",
                    "site_id": f"site-{n // DEVICES_PER_SITE}",
                    "name": f"cam {n}",
                    "path_name": path,
                    "source_uri": f"rtsp://127.0.0.1:1/{path}",
                    "desired_state": "enabled",
                }
                response = await api.post("/v1/devices", json=body)
                response.raise_for_status()
                owned.wake()
        await wait_converged(pool, schema)
        wall = time.monotonic() - started
        rows = await pool.fetch(
            f"SELECT extract(epoch FROM r.last_result_at - d.created_at) AS seconds "
            f"FROM {schema.quoted}.reconcile_state r JOIN {schema.quoted}.devices d ON d.id = r.device_id"
        )
        latencies = sorted(float(r["seconds"]) for r in rows)
        present = set(await mediamtx.list_path_names())
        missing = [p for p in paths if p not in present]
        p50 = statistics.median(latencies)
        p99 = latencies[max(0, int(len(latencies) * 0.99) - 1)]
        print(f"devices: {devices}   paths present: {devices - len(missing)}")
        print(f"wall (API calls + convergence): {wall:.2f} s   converged/s: {devices / wall:.1f}")
        print(
            f"API call -> path configured: p50 {p50 * 1000:.0f} ms  p99 {p99 * 1000:.0f} ms (goal p99 <= 1 s)"
        )
        return devices / wall
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(loop_task, 30)
        await mediamtx.aclose()
        await pool.close()
        await delete_paths_with_prefix(stack.mediamtx_api_url, prefix)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--devices", type=int, default=1000)
    run_cleanly(bench(parser.parse_args().devices))


if __name__ == "__main__":
    main()
