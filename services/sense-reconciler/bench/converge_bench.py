"""Benchmark: Sense converging MediaMTX at MediaMTX's own speed, measured side by side in one run.

    .venv/bin/python services/sense-reconciler/bench/converge_bench.py [--devices 1000] [--servers 4]
        [--changes 50]

Sense runs as `serve` wires it (sense_bench_harness): the Control API in process, taking the access tokens of
a private ORY Hydra (the `bench` machine client's), the outbox relay to Kafka, the device consumer waking
the reconciler, one writer per MediaMTX server. Every MediaMTX is a private, authenticated process started
empty for its measurement. In order:

1. baseline: `--devices` plain sequential path adds to an empty MediaMTX (adds/s), then `--changes` plain
   replaces of one path each with those present (ms each);
2. a burst: `--devices` devices created through the API as fast as it answers, all enabled, on one server;
   wall time from the first create to the last converged, latency per device, and every failed item and
   every device that needed a retry (a backoff of our own making would show here). Goal: >= 0.9 of 1.;
3. with those devices converged: `--changes` single URI changes, one after the other; time from the API call
   until MediaMTX answered the replace, the wake-up through Kafka included, and the part MediaMTX took;
   next to MediaMTX's own replace time at that size (measured in 1.). Goal: p99 <= 300 ms;
4. the same burst over `--servers` servers (sites assigned round-robin). Goal: >= 3x faster than 2.

Prints each figure with its ratio and goal. The machine is shared: figures vary with the other load.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from collections.abc import Sequence
from pathlib import Path

import asyncpg
import httpx
from sense_bench_harness import (
    BENCH_CLIENT,
    Burst,
    identity_provider_for_bench,
    mediamtx_binary,
    raw_replaces,
    raw_sequential_adds,
    sense_under_test,
)

from yovision_platform.localstack import LocalStack
from yovision_platform.tools.bench_runner import Counts, run_cleanly
from yovision_platform.tools.hydra import PrivateHydra
from yovision_platform.tools.mediamtx_sandbox import MediaMtxSandbox, mediamtx_sandbox

REPO_ROOT = Path(__file__).resolve().parents[3]
CHANGE_GAP_SECONDS = 0.2
CHANGE_TIMEOUT_SECONDS = 10.0


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(len(ordered) * fraction + 0.5) - 1))]


def ms(values: list[float], fraction: float) -> str:
    return f"{percentile(values, fraction) * 1000:.0f}"


def show_burst(label: str, burst: Burst) -> None:
    p50, p99 = statistics.median(burst.latencies_seconds), percentile(burst.latencies_seconds, 0.99)
    print(
        f"{label}: {burst.devices} devices on {burst.servers} server(s) in {burst.wall_seconds:.1f} s = "
        f"{burst.rate:.1f} converged/s (the API answered every create after {burst.created_seconds:.1f} s); "
        f"API call -> path configured p50 {p50:.1f} s, p99 {p99:.1f} s; "
        f"failed items {burst.failed_items}, devices retried {burst.retried_devices}"
    )
    busy = ", ".join(f"{100 * b / burst.wall_seconds:.0f}%" for b in burst.busy_seconds)
    print(f"   MediaMTX busy with our requests (share of the wall time, per server): {busy}")


async def configured_paths(servers: Sequence[MediaMtxSandbox]) -> int:
    """Paths configured on `servers`, as MediaMTX itself lists them (the converge's target)."""
    total = 0
    async with httpx.AsyncClient(timeout=10.0) as http:
        for server in servers:
            answer = await http.get(
                f"{server.url}/v3/config/paths/list", params={"itemsPerPage": 1}, auth=server.auth()
            )
            answer.raise_for_status()
            total += int(answer.json()["itemCount"])
    return total


async def bench(devices: int, servers: int, changes: int, work_dir: Path, counts: Counts) -> None:
    stack = LocalStack.load(REPO_ROOT / ".local")
    admin = await asyncpg.connect(stack.admin_dsn)
    try:
        async with identity_provider_for_bench(stack, work_dir) as identity:
            await measure(stack, admin, identity, devices, servers, changes, work_dir, counts)
    finally:
        await admin.close()


async def measure(
    stack: LocalStack,
    admin: asyncpg.Connection,
    identity: PrivateHydra,
    devices: int,
    servers: int,
    changes: int,
    work_dir: Path,
    counts: Counts,
) -> None:
    binary = mediamtx_binary(REPO_ROOT)
    async with mediamtx_sandbox(binary, work_dir, label="raw") as raw:
        raw_rate = await raw_sequential_adds(raw, devices)
        floor = await raw_replaces(raw, changes, gap_seconds=CHANGE_GAP_SECONDS)
    print(f"1. baseline: raw sequential MediaMTX adds: {raw_rate:.1f}/s ({devices} paths, empty start)")
    print(
        f"   raw MediaMTX replace of one path with {devices} present: p50 {ms(floor, 0.5)} ms, "
        f"p99 {ms(floor, 0.99)} ms ({changes} sequential)"
    )

    async with (
        mediamtx_sandbox(binary, work_dir, label="one") as one,
        sense_under_test(stack, admin, [one], "2-3. one server", identity) as sense,
    ):
        single = await sense.burst(devices)
        counts.expect("2. paths on the server after the burst", await configured_paths([one]), devices)
        audited = await sense.audit_facts_by(BENCH_CLIENT)
        counts.expect("2. creates audited as the bench client (its token's sub)", audited, devices)
        show_burst("2. burst, one server", single)
        print(f"   ratio to raw adds: {single.rate / raw_rate:.2f} (goal >= 0.90)")
        print(f"   backoffs of our own making: {single.retried_devices} (goal 0)")
        timed = await sense.single_changes(
            changes, gap_seconds=CHANGE_GAP_SECONDS, timeout_seconds=CHANGE_TIMEOUT_SECONDS
        )
    totals = timed.totals
    counts.expect("3. single changes MediaMTX applied", len(totals), changes)
    print(
        f"3. single change with {devices} converged, wake-up through Kafka: {len(totals)} changes, "
        f"p50 {ms(totals, 0.5)} ms, p99 {ms(totals, 0.99)} ms, max {max(totals) * 1000:.0f} ms "
        "(goal p99 <= 300 ms)"
    )
    print(
        f"   of which MediaMTX answering the replace: p50 {ms(timed.mediamtx, 0.5)} ms, "
        f"p99 {ms(timed.mediamtx, 0.99)} ms"
    )

    async with contextlib.AsyncExitStack() as fleet_stack:
        fleet = [
            await fleet_stack.enter_async_context(mediamtx_sandbox(binary, work_dir, label=f"fleet-{n}"))
            for n in range(servers)
        ]
        async with sense_under_test(stack, admin, fleet, f"4. {servers} servers", identity) as sense:
            spread = await sense.burst(devices)
            counts.expect(f"4. paths on the {servers} servers", await configured_paths(fleet), devices)
    show_burst(f"4. burst, {servers} servers", spread)
    print(
        f"   speed-up over one server: {single.wall_seconds / spread.wall_seconds:.2f}x (goal >= 3x); "
        f"backoffs of our own making: {spread.retried_devices} (goal 0)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--work-dir", type=Path, default=REPO_ROOT / ".local" / "run" / "converge-bench")
    args = parser.parse_args()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    counts = Counts()
    run_cleanly(bench(args.devices, args.servers, args.changes, args.work_dir, counts))
    counts.exit_if_short("converge_bench")


if __name__ == "__main__":
    main()
