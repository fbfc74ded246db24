"""The convergence benchmark removes what it created even when it is stopped halfway (SIGTERM, as Ctrl-C):
its schema and roles, its Kafka topics, its MediaMTX processes."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from pathlib import Path

import asyncpg
from aiokafka.admin import AIOKafkaAdminClient

from tests.support.stack import Stack

REPO_ROOT = Path(__file__).resolve().parents[3]
BENCH = REPO_ROOT / "services/sense-reconciler/bench/converge_bench.py"
NAMES = re.compile(r"schema (bench_[0-9a-f]+), Kafka prefix (bench-[0-9a-f]+\.)")


async def topics_with(stack: Stack, prefix: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=stack.kafka_bootstrap)
    await admin.start()
    try:
        return [t for t in await admin.list_topics() if t.startswith(prefix)]
    finally:
        await admin.close()


def processes_under(folder: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(folder) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


async def test_a_benchmark_stopped_mid_run_leaves_nothing_behind(
    stack: Stack, admin_conn: asyncpg.Connection, tmp_path: Path
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(BENCH),
        "--devices",
        "60",
        "--work-dir",
        str(tmp_path),
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        while True:
            line = await asyncio.wait_for(process.stdout.readline(), 300)
            assert line, "the benchmark ended before it was interrupted"
            if (match := NAMES.search(line.decode())) is not None:
                break
        schema, prefix = match.groups()
        for _ in range(600):  # bounded: the devices are created within seconds of the line
            migrated = await admin_conn.fetchval("SELECT to_regclass($1)", f"{schema}.devices") is not None
            if migrated and await admin_conn.fetchval(f"SELECT count(*) FROM {schema}.devices") > 0:
                break
            await asyncio.sleep(0.05)
        assert processes_under(tmp_path), "the benchmark's MediaMTX should be running"
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 120)
        present = await admin_conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema)
        assert present == 0
        for _ in range(200):  # Kafka deletes topics asynchronously: bounded wait until they are gone
            if not await topics_with(stack, prefix):
                break
            await asyncio.sleep(0.1)
        assert await topics_with(stack, prefix) == []
        assert processes_under(tmp_path) == []
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
