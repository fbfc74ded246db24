"""Benchmark: sustained probes per second of the real check path vs a raw async GET loop.

    .venv/bin/python services/signal-watcher/bench/probe_bench.py [--watchers 10000] [--concurrency 200]

Creates N ACTIVE watchers (STATUS_CODE mode) in a fresh schema on the local stack, all pointing at one
local HTTP server (a child process), then lets one Scheduler check them all once: probe through the
SSRF-guarded client, judge, and write watcher + check row in one transaction. The raw baseline is an
httpx GET loop with the same concurrency against the same server, in the same run. Prints both rates, the
ratio (goal >= 0.7 and >= 500 probes/s) and the scheduler process's peak RSS. The probe client here is
built with the loopback-allowing guard, exactly as the tests do; production never is.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import resource
import secrets
import subprocess
import sys
import time
import uuid
from pathlib import Path

import asyncpg
import httpx

from signal_watcher.adapters.crypto import SecretCipher
from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.domain.model import CompareMode, Method, WatcherSpec
from signal_watcher.domain.ssrf import AddressGuard, IpAddress, parse_networks
from signal_watcher.entrypoints.main import MIGRATIONS_DIR
from signal_watcher.service_layer.checks import CheckRunner
from signal_watcher.service_layer.scheduler import Scheduler
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.db import Identifier
from yovision_platform.encryption import EncryptionKeyRing
from yovision_platform.localstack import LocalStack, runtime_dsn
from yovision_platform.migrations import SchemaPlan, drop, migrate
from yovision_platform.tools.bench_runner import Counts
from yovision_platform.tools.environment import TEST_PROBE_ONLY_NETWORKS

REPO_ROOT = Path(__file__).resolve().parents[3]
BENCH_HOST = "bench-target.example.com"
GOAL_PROBES_PER_SECOND = 500
GOAL_RATIO = 0.7
SERVER = r"""
import asyncio, sys
async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
    except Exception:
        pass
    finally:
        writer.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
"""


async def _resolve(host: str, port: int) -> list[IpAddress]:
    return [ipaddress.ip_address("127.0.0.1")]


async def raw_loop(url: str, total: int, concurrency: int) -> float:
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=concurrency)) as client:
        queue = iter(range(total))

        async def worker() -> None:
            for _ in queue:
                (await client.get(url)).raise_for_status()

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return total / (time.monotonic() - started)


def start_server() -> tuple[subprocess.Popen[str], int]:
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    return server, int(server.stdout.readline())


async def main(watchers: int, concurrency: int, port: int) -> dict[str, float]:
    stack = LocalStack.load(REPO_ROOT / ".local")
    schema = Identifier(f"bench_signal_{uuid.uuid4().hex[:8]}")
    admin = await asyncpg.connect(stack.admin_dsn)
    password = secrets.token_hex(16)
    plan = SchemaPlan.for_service(schema, MIGRATIONS_DIR)
    await migrate(admin, plan, runtime_password=password)
    pool = await asyncpg.create_pool(runtime_dsn(stack.admin_dsn, plan.runtime_role, password), max_size=20)
    guard = AddressGuard.allowing([ipaddress.ip_network("127.0.0.0/8")])  # the bench's target is local
    probe = ProbeClient(resolver=_resolve, guard=guard.confined_to(parse_networks(TEST_PROBE_ONLY_NETWORKS)))
    try:
        ring = EncryptionKeyRing({"bench": secrets.token_bytes(32)}, "bench")
        units_of_work = PostgresUnitsOfWork(pool, schema, SecretCipher(ring))
        url = f"http://{BENCH_HOST}:{port}/"
        spec = WatcherSpec(
            "b", "agent", url, Method.GET, (), None, 5, CompareMode.STATUS_CODE, None, "{diff}"
        )
        async with units_of_work() as uow:
            for i in range(watchers):
                await uow.watchers.insert(f"user-{i % 100}", spec)
        raw = await raw_loop(f"http://127.0.0.1:{port}/", watchers, concurrency)
        runner = CheckRunner(units_of_work, probe, AvroSerde(SchemaRegistry.load()))
        scheduler = Scheduler(units_of_work, runner, "bench", max_in_flight=concurrency)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.monotonic()
        await scheduler.scan()
        await scheduler.drain(600)
        elapsed = time.monotonic() - started
        checked = await pool.fetchval(f"SELECT count(*) FROM {schema.quoted}.checks WHERE error_code IS NULL")
    finally:
        await probe.aclose()
        await pool.close()
        await drop(admin, plan)
        await admin.close()
    rate = checked / elapsed
    return {
        "watchers": watchers,
        "concurrency": concurrency,
        "checks_ok": checked,
        "probes_per_second": round(rate, 1),
        "raw_gets_per_second": round(raw, 1),
        "ratio": round(rate / raw, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_before_scan_mib": round(rss_before / 1024, 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watchers", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=200)
    args = parser.parse_args()
    server, port = start_server()
    try:
        result = asyncio.run(main(args.watchers, args.concurrency, port))
    finally:
        server.terminate()
    counts = Counts()
    whole = counts.expect("checks that succeeded, one per watcher", int(result["checks_ok"]), args.watchers)
    rate = Counts.mark(whole, f"{result['probes_per_second']:>8} probes/s")
    print(f"real check path : {rate} ({result['checks_ok']} ok of {args.watchers})")
    print(f"raw async GET   : {result['raw_gets_per_second']:>8} GET/s")
    ratio = Counts.mark(whole, f"{result['ratio']:>8}")
    print(f"ratio           : {ratio}")
    met = whole and result["ratio"] >= GOAL_RATIO and result["probes_per_second"] >= GOAL_PROBES_PER_SECOND
    print(
        f"goal: ratio >= {GOAL_RATIO} and >= {GOAL_PROBES_PER_SECOND} probes/s: {'met' if met else 'NOT met'}"
    )
    print(f"peak RSS        : {result['peak_rss_mib']:>8} MiB")
    print("BENCH_JSON " + json.dumps({**result, "wrong_counts": counts.short}))
    counts.exit_if_short("probe_bench")
