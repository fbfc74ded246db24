"""The convergence benchmark removes what it created even when it is stopped halfway (SIGTERM, as Ctrl-C)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from tests.conftest import Stack
from yovision_platform.mediamtx import MediaMtxApi

BENCH = Path(__file__).resolve().parents[3] / "services/sense-reconciler/bench/converge_bench.py"
REPO_ROOT = Path(__file__).resolve().parents[3]


async def bench_paths(mediamtx: MediaMtxApi, before: set[str]) -> set[str]:
    return {name for name in await mediamtx.list_path_names() if name.startswith("bench-")} - before


async def test_a_benchmark_stopped_mid_run_leaves_no_mediamtx_path(stack: Stack) -> None:
    mediamtx = MediaMtxApi(
        stack.mediamtx_api_url, credentials=stack.mediamtx_credentials(), deadline_seconds=10.0
    )
    before = await bench_paths(mediamtx, set())
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(BENCH),
        "--devices",
        "2000",
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        for _ in range(600):  # bounded: the raw baseline adds its first paths within seconds
            seen = await bench_paths(mediamtx, before)
            if len(seen) >= 10:
                break
            assert process.returncode is None, "the benchmark ended before it was interrupted"
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the benchmark never created a path")
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 120)
        assert await bench_paths(mediamtx, before) == set()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await mediamtx.aclose()
