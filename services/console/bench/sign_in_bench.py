"""Benchmark: signing in through the console and ORY Hydra, as a browser does, end to end.

    .venv/bin/python services/console/bench/sign_in_bench.py [--samples 200]

Needs the stack's PostgreSQL (`make up`, or `infra/scripts/stack.sh up pg`). Starts a private Hydra
(`tools.hydra.private_hydra`: a role and schema of its own, free loopback ports, the environment's clients
registered with fresh secrets) whose login, consent and logout pages are a real console process (`console
serve`, the dev login on, on a free port; the five service URLs at a closed port: signing in calls none).
No key is shared: Hydra signs every token, the console verifies the ID token against Hydra's JWKS.

Each sample is a new browser (a fresh cookie jar): `GET /sign-in` -> Hydra -> the login page -> the form
posted -> Hydra -> the consent -> Hydra -> the callback (the code exchanged with the client's secret, the ID
token verified, the session sealed), timed until the callback's redirect to `/` (the overview is the render
benchmark's). Samples run one at a time after a warm-up. Prints p50/p95/p99/max, the goal (p95 <= 300 ms on
2 cores) and the machine's cores and load; exits 1 when fewer sign-ins than asked for succeeded. On exit
(Ctrl-C and SIGTERM included) the console is stopped and Hydra's role and schema are dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from browser_sign_in import sign_in

from yovision_platform.localstack import LocalStack
from yovision_platform.tools import hydra, identity_provider
from yovision_platform.tools.bench_runner import BenchCounts, run_cleanly
from yovision_platform.tools.localhost import free_port, stop_process, write_private_file
from yovision_platform.web import AUDIENCES, PERMISSIONS

REPO_ROOT = Path(__file__).resolve().parents[3]
GOAL_P95_MS = 300.0
WARM_UP = 5
READY_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 10.0


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def console_environment(
    work: Path, console_port: int, issuer: str, admin_url: str, secret: str
) -> dict[str, str]:
    closed = f"http://127.0.0.1:{free_port()}"
    inherited = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TZ")}
    return {
        **inherited,
        "CONSOLE_HTTP_PORT": str(console_port),
        "CONSOLE_LOG_LEVEL": "WARNING",
        "CONSOLE_SESSION_KEY_FILE": str(write_private_file(work / "session.key", secrets.token_hex(32))),
        "CONSOLE_OIDC_ISSUER": issuer,
        "CONSOLE_OIDC_CLIENT_ID": identity_provider.CONSOLE_CLIENT,
        "CONSOLE_OIDC_CLIENT_SECRET_FILE": str(write_private_file(work / "console.secret", secret)),
        "CONSOLE_DEV_LOGIN_ADMIN_URL": admin_url,
        **{f"CONSOLE_{name}_URL": closed for name in ("SENSE", "ORPHAN", "BELL", "SIGNAL", "MEDIA")},
    }


async def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    async with httpx.AsyncClient(timeout=2.0) as http:
        while True:
            try:
                if (await http.get(f"{url}/healthz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if process.poll() is not None:
                raise RuntimeError(f"the console exited {process.returncode} (see its log)")
            if time.monotonic() > deadline:
                raise RuntimeError("the console was not ready in time")
            await asyncio.sleep(0.1)


async def timed_sign_in(console_url: str, n: int) -> float:
    async with httpx.AsyncClient(timeout=30.0) as browser:  # a new browser: no cookie of any earlier one
        started = time.perf_counter()
        await sign_in(console_url, browser, f"bench-signin-{n:05d}", PERMISSIONS)
        return (time.perf_counter() - started) * 1000


async def main(args: argparse.Namespace) -> None:
    admin_dsn = LocalStack.load(REPO_ROOT / ".local").admin_dsn
    load_before = os.getloadavg()
    counts = BenchCounts()
    with tempfile.TemporaryDirectory(prefix="console-sign-in-bench-") as root:
        work = Path(root)
        console_port = free_port()
        console_url = f"http://127.0.0.1:{console_port}"
        clients = identity_provider.clients(console_url, AUDIENCES)
        console: subprocess.Popen[bytes] | None = None
        samples: list[float] = []
        failures: list[str] = []
        print(f"starting a private Hydra and a console on {console_url}...", flush=True)
        async with hydra.private_hydra(
            admin_dsn, work / "hydra", clients, console_url=console_url
        ) as private:
            try:
                environment = console_environment(
                    work,
                    console_port,
                    private.instance.issuer,
                    private.instance.admin_url,
                    private.client_secrets[identity_provider.CONSOLE_CLIENT],
                )
                console = start_console(work, environment)
                await wait_ready(console_url, console)
                for n in range(WARM_UP):
                    await timed_sign_in(console_url, n)
                for n in range(args.samples):
                    try:
                        samples.append(await timed_sign_in(console_url, WARM_UP + n))
                    except (RuntimeError, httpx.HTTPError) as failed:
                        failures.append(type(failed).__name__)
            finally:
                if console is not None:
                    stop_process(console, STOP_TIMEOUT_SECONDS)
    load_after = os.getloadavg()
    ok = counts.expect("sign-ins through the console and Hydra", len(samples), args.samples)
    report(samples, ok, counts)
    if failures:
        print(f"failed sign-ins: {len(failures)} ({', '.join(sorted(set(failures)))})")
    print(
        f"machine: {os.cpu_count()} cores, shared with other work; 1-min load average"
        f" {load_before[0]:.2f} before, {load_after[0]:.2f} after."
    )
    counts.exit_if_short("sign_in_bench")


def report(samples: list[float], ok: bool, counts: BenchCounts) -> None:
    if not samples:
        return
    p50, p95 = statistics.median(samples), percentile(samples, 0.95)
    p99, worst = percentile(samples, 0.99), max(samples)
    print(f"\nsign-in through the console and Hydra, {len(samples)} samples, one at a time, ms:")
    print(f"{'p50':>8}{'p95':>8}{'p99':>8}{'max':>8}")
    print(counts.mark(ok, f"{p50:>8.1f}{p95:>8.1f}{p99:>8.1f}{worst:>8.1f}"))
    verdict = "ok" if p95 <= GOAL_P95_MS else "OVER"
    print(f"goal: p95 <= {GOAL_P95_MS:.0f} ms on 2 cores: {counts.mark(ok, f'{p95:.1f} ms {verdict}')}")


def start_console(work: Path, environment: dict[str, str]) -> subprocess.Popen[bytes]:
    """`console serve` in a session of its own, its output in `console.log` of the work directory."""
    with (work / "console.log").open("ab") as log:
        return subprocess.Popen(
            [str(REPO_ROOT / ".venv" / "bin" / "console"), "serve"],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    if args.samples < 20:
        parser.error("at least 20 samples")
    return args


if __name__ == "__main__":
    sys.exit(run_cleanly(main(parse())))
