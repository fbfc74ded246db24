"""Benchmark: server render time of the console's pages over a large fleet, against the raw API calls.

    .venv/bin/python services/console/bench/render_bench.py [--devices 10000] [--watchers 10000]
        [--audit-rows 100000] [--materials 1000] [--samples 100]

Starts a whole environment of the six services (`local_environment`: own schemas, own Kafka prefix, a
private MediaMTX, its own ORY Hydra, the real console process with the dev login, exactly as `make up`
starts them), seeds it (render_seed.py: devices and the orphan report through the APIs, audit rows, watchers
and materials through the services' repositories), waits until it is quiet (outboxes drained, no consumer
lag, every device converged), then signs in to the console through Hydra as a browser does
(browser_sign_in.py) and times each page, one request at a time. No key is shared: every token is Hydra's.

The baseline, in the same run and interleaved with the page requests, is the raw API call(s) that page
makes, with the same identity (the bench user's own Hydra access token for the five services, as the console
holds one), in the same shape (sequential where the page must wait for one answer to make the next call,
concurrent where the page reads concurrently). So `ratio` is what the console adds on top of the services:
its hop, the encrypted session and rendering. Goal: page p95 <= 150 ms on 2 cores. (Signing in itself:
sign_in_bench.py.)

Prints p50/p95 per page and per baseline, the ratio of the p50s and of the p95s, and the machine's core
count and load average (the figures are from a machine shared with other work: say so with them). On exit
-- success, failure, Ctrl-C or SIGTERM (`run_cleanly`) -- the environment is removed: processes, schemas,
roles, topics and the MediaMTX sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from browser_sign_in import sign_in
from render_seed import (
    TENANT,
    Seeded,
    bench_user,
    count_rows,
    seed_audit,
    seed_devices,
    seed_materials,
    seed_watchers,
    stage_orphans,
    wait_converged,
)

from yovision_platform.tools.bench_runner import run_cleanly
from yovision_platform.tools.devtoken import user_access_token
from yovision_platform.tools.doctor import examine_until_settled
from yovision_platform.tools.environment import LocalEnvironment, local_environment
from yovision_platform.web import AUDIENCES, PERMISSIONS

GOAL_P95_MS = 150.0
WARM_UP = 5
SETTLE_SECONDS = 900.0
TOKEN_RENEW_SECONDS = 600.0  # Hydra's access tokens live 15 minutes; a run lasts longer
SERVICES = ("sense-reconciler", "orphan-scanner", "bell-receiver", "signal-watcher", "media-worker")
PAGE_ITEMS = 50  # devices, watchers and audit rows per console page
CHECK_PAGE_ITEMS = 25


class UserToken(httpx.Auth):
    """The bench user's own access token from the environment's Hydra (`make dev-token`'s way: signed in
    through the `dev-token` client), for the five services; a new one after TOKEN_RENEW_SECONDS."""

    def __init__(self, env: LocalEnvironment, user: str) -> None:
        self._env, self._user = env, user
        self._token: str | None = None
        self._taken_at = 0.0
        self._lock = asyncio.Lock()

    async def token(self) -> str:
        async with self._lock:
            if self._token is None or time.monotonic() - self._taken_at > TOKEN_RENEW_SECONDS:
                self._token = await user_access_token(self._env.root, self._user, PERMISSIONS, AUDIENCES)
                self._taken_at = time.monotonic()
            return self._token

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        request.headers["Authorization"] = f"Bearer {await self.token()}"
        yield request


class Raw:
    """The services' APIs as the console calls them, with the bench user's identity."""

    def __init__(self, env: LocalEnvironment, user: str) -> None:
        auth = UserToken(env, user)
        self._clients = {s: httpx.AsyncClient(base_url=env.url(s), auth=auth, timeout=30) for s in SERVICES}
        self.sense = self._clients["sense-reconciler"]
        self.user = user

    async def get(self, service: str, path: str, **params: Any) -> Any:
        given = {k: v for k, v in params.items() if v is not None}
        response = await self._clients[service].get(path, params=given)
        response.raise_for_status()
        return response.json() if "json" in response.headers.get("content-type", "") else response.text

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()


@dataclass
class Case:
    label: str
    page: str
    baseline: Callable[[], Awaitable[Any]]
    sequential: Callable[[], Awaitable[Any]] | None = None  # the page's concurrent reads, one by one


def cases(raw: Raw, seeded: Seeded, deep: dict[str, str]) -> list[Case]:
    device = seeded.device_ids[len(seeded.device_ids) // 2]
    watcher = seeded.watcher_of_checks
    month_ago = (datetime.now(UTC) - timedelta(days=25)).strftime("%Y-%m-%dT%H:%M")

    async def devices(**filters: Any) -> None:
        page = await raw.get("sense-reconciler", "/v1/devices", limit=PAGE_ITEMS, **filters)
        ids = [("device_id", d["id"]) for d in page["items"]]
        await raw.sense.get("/v1/reconcile-statuses", params=ids)

    async def overview() -> None:
        await asyncio.gather(*(raw.get(s, p) for s in SERVICES for p in ("/readyz", "/metrics")))

    def device_reads() -> list[Awaitable[Any]]:
        return [
            raw.get("sense-reconciler", f"/v1/devices/{device}"),
            raw.get("sense-reconciler", f"/v1/devices/{device}/reconcile-status"),
        ]

    def watcher_reads() -> list[Awaitable[Any]]:
        return [
            raw.get("signal-watcher", f"/v1/signal-watchers/{watcher}"),
            raw.get("signal-watcher", f"/v1/signal-watchers/{watcher}/checks", limit=CHECK_PAGE_ITEMS),
        ]

    def media_reads() -> list[Awaitable[Any]]:
        return [
            raw.get("media-worker", "/v1/materials"),
            raw.get("media-worker", "/internal/instances"),
            raw.get("media-worker", "/internal/drain"),
        ]

    def audit(**filters: Any) -> Callable[[], Awaitable[Any]]:
        return lambda: raw.get("bell-receiver", "/v1/audit-events", limit=PAGE_ITEMS, **filters)

    def watchers(path: str, **params: Any) -> Callable[[], Awaitable[Any]]:
        return lambda: raw.get("signal-watcher", path, limit=PAGE_ITEMS, **params)

    after = deep["device_after"]
    cursor = deep["watcher_cursor"]
    before = month_ago + ":00+00:00"
    return [
        Case("overview", "/", overview),
        Case("devices (tenant)", f"/devices?tenant_id={TENANT}", lambda: devices(tenant_id=TENANT)),
        Case("devices (one site)", f"/devices?tenant_id={TENANT}&site_id=site-042",
             lambda: devices(tenant_id=TENANT, site_id="site-042")),
        Case("devices (last page)", f"/devices?tenant_id={TENANT}&after={after}",
             lambda: devices(tenant_id=TENANT, after=after)),
        Case("device", f"/devices/{device}", together(device_reads), one_by_one(device_reads)),
        Case("watchers (own 100)", "/watchers", watchers("/v1/signal-watchers")),
        Case("watchers (all)", "/watchers/all", watchers("/v1/admin/signal-watchers")),
        Case("watchers (all, deep)", f"/watchers/all?cursor={cursor}",
             watchers("/v1/admin/signal-watchers", cursor=cursor)),
        Case("watcher + check log", f"/watchers/{watcher}", together(watcher_reads),
             one_by_one(watcher_reads)),
        Case("audit (all)", "/audit", audit()),
        Case("audit (one device)", f"/audit?source_system=sense&device_id={device}",
             audit(source_system="sense", device_id=device)),
        Case("audit (25 days back)", f"/audit?occurred_before={month_ago}", audit(occurred_before=before)),
        Case("media", "/media", together(media_reads), one_by_one(media_reads)),
        Case("orphans", "/orphans", lambda: raw.get("orphan-scanner", "/v1/reports/latest")),
    ]  # fmt: skip


def together(reads: Callable[[], list[Awaitable[Any]]]) -> Callable[[], Awaitable[Any]]:
    async def run() -> None:
        await asyncio.gather(*reads())

    return run


def one_by_one(reads: Callable[[], list[Awaitable[Any]]]) -> Callable[[], Awaitable[Any]]:
    async def run() -> None:
        for read in reads():
            await read

    return run


async def deep_positions(raw: Raw, seeded: Seeded) -> dict[str, str]:
    """The position before the tenant's last device page; the admin watcher list's cursor two pages of 100
    before its end."""
    last_page_after = sorted(seeded.device_ids)[-PAGE_ITEMS - 1]
    cursor = None
    for _ in range(max(1, seeded.counts["watchers"] // 100 - 2)):
        page = await raw.get("signal-watcher", "/v1/admin/signal-watchers", limit=100, cursor=cursor)
        cursor = page["next_cursor"]
    assert cursor is not None
    return {"device_after": last_page_after, "watcher_cursor": cursor}


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


async def measure(
    console: httpx.AsyncClient, case: Case, samples: int
) -> tuple[list[float], list[float], list[float]]:
    async def page() -> None:
        answer = await console.get(case.page)
        if answer.status_code != 200:
            raise RuntimeError(f"{case.page}: {answer.status_code}")

    for _ in range(WARM_UP):
        await page()
        await case.baseline()
    pages, baselines, sequential = [], [], []
    for _ in range(samples):  # interleaved: all see the same moment of a shared machine
        pages.append(await timed(page))
        baselines.append(await timed(case.baseline))
        if case.sequential is not None:
            sequential.append(await timed(case.sequential))
    return pages, baselines, sequential


async def main(args: argparse.Namespace) -> None:
    name = f"bench-console-{uuid.uuid4().hex[:6]}"
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="console-bench-") as root:
        print(f"starting environment {name} (six services, private MediaMTX)...", flush=True)
        async with local_environment(Path(root), name) as env:
            seeded = await seed(env, args)
            user = bench_user(0)
            raw = Raw(env, user)
            console = httpx.AsyncClient(base_url=env.url("console"), timeout=30)
            try:
                await sign_in(env.url("console"), console, user, PERMISSIONS)
                await report(console, cases(raw, seeded, await deep_positions(raw, seeded)), args.samples)
            finally:
                await console.aclose()
                await raw.aclose()
    load_after = os.getloadavg()
    print(
        "\nms, one request at a time over loopback; x = page / raw API calls of that page, same run."
        f"\nmachine: {os.cpu_count()} cores, SHARED with other work; 1-min load average"
        f" {load_before[0]:.2f} before, {load_after[0]:.2f} after."
        f" Goal: p95 <= {GOAL_P95_MS:.0f} ms per page."
    )


async def report(console: httpx.AsyncClient, all_cases: list[Case], samples: int) -> None:
    print(f"\nmeasuring {len(all_cases)} pages x {samples} samples (page and baseline interleaved)")
    head = f"{'page':<24}{'p50':>8}{'p95':>8}{'api p50':>9}{'api p95':>9}{'x p50':>7}{'x p95':>7}"
    print(head + "  goal")
    concurrency: list[str] = []
    for case in all_cases:
        pages, baselines, sequential = await measure(console, case, samples)
        if sequential:
            b50, s50 = statistics.median(baselines), statistics.median(sequential)
            concurrency.append(f"{case.label:<24}{b50:>8.1f}{s50:>8.1f}{b50 / s50:>7.2f}")
        p50, p95 = statistics.median(pages), percentile(pages, 0.95)
        b50, b95 = statistics.median(baselines), percentile(baselines, 0.95)
        verdict = "ok" if p95 <= GOAL_P95_MS else "OVER"
        print(f"{case.label:<24}{p50:>8.1f}{p95:>8.1f}{b50:>9.1f}{b95:>9.1f}"
              f"{p50 / b50:>7.2f}{p95 / b95:>7.2f}  {verdict}", flush=True)  # fmt: skip
    print("\nthe pages' independent reads (raw API, p50 ms): concurrently as the console does, one by one")
    print(f"{'page':<24}{'conc':>8}{'seq':>8}{'x':>7}")
    print("\n".join(concurrency))


async def seed(env: LocalEnvironment, args: argparse.Namespace) -> Seeded:
    seeded = Seeded()
    raw = Raw(env, bench_user(0))
    mediamtx = httpx.AsyncClient(base_url=env.mediamtx_url, auth=env.mediamtx.auth(), timeout=30)
    try:
        started = time.monotonic()
        await seed_devices(env, raw.sense, args.devices, seeded)
        print(
            f"{args.devices} devices through the Control API in {time.monotonic() - started:.0f} s",
            flush=True,
        )
        await wait_converged(raw.sense)
        await stage_orphans(env, raw.sense, mediamtx, seeded)
        await settle(env)
        await seed_audit(env, args.audit_rows, seeded)
        await seed_watchers(env, args.watchers, seeded)
        await seed_materials(env, args.materials, seeded)
        await settle(env)
        seeded.counts = await count_rows(env)
        print(f"seeded in {time.monotonic() - started:.0f} s: "
              + ", ".join(f"{n} {label}" for label, n in seeded.counts.items()), flush=True)  # fmt: skip
        return seeded
    finally:
        await mediamtx.aclose()
        await raw.aclose()


async def settle(env: LocalEnvironment) -> None:
    """Outboxes drained, no consumer lag, no dead letter: nothing but the measured requests runs."""
    report = await examine_until_settled(
        env.root, wait_seconds=SETTLE_SECONDS, checks=("dead_letters", "outbox_backlog", "consumer_lag")
    )
    if not report.healthy:
        raise RuntimeError(f"the environment did not settle:\n{report.text()}")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--devices", type=int, default=10_000)
    parser.add_argument("--watchers", type=int, default=10_000)
    parser.add_argument("--audit-rows", type=int, default=100_000)
    parser.add_argument("--materials", type=int, default=1_000)
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    if args.devices < 100 or args.watchers < 300 or args.samples < 20:
        parser.error("at least 100 devices, 300 watchers and 20 samples")
    return args


if __name__ == "__main__":
    run_cleanly(main(parse()))
