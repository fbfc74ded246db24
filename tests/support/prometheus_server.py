"""A private Prometheus for one test: the stack's own build (infra/scripts/install-prometheus.sh: a copy from
the machine's tool cache, or a build), on a free loopback port, with the test's rule files and scrape
targets, at the test's interval; stopped on exit. Its data lives in the test's folder."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

from yovision_platform.tools.localhost import free_port, stop_process

__all__ = [
    "PrivatePrometheus",
    "alert_entry",
    "alerts_answer",
    "private_prometheus",
    "prometheus_binary",
    "prometheus_command",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 10.0
POLL_SECONDS = 0.2
LOG_TAIL_CHARS = 3000

T = TypeVar("T")


def prometheus_binary() -> Path:
    subprocess.run(
        [str(REPO_ROOT / "infra" / "scripts" / "install-prometheus.sh")], check=True, cwd=REPO_ROOT
    )
    return REPO_ROOT / ".local" / "bin" / "prometheus"


def prometheus_command(binary: Path, config_file: Path, port: int, data: Path) -> list[str]:
    """How every private Prometheus of the tests starts: `config_file`, on 127.0.0.1:`port` only, its data
    in `data` (the alert tests here, the stack's own configuration in tests/deploy)."""
    return [
        str(binary),
        f"--config.file={config_file}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--storage.tsdb.path={data}",
    ]


@dataclass(frozen=True)
class PrivatePrometheus:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    http: httpx.AsyncClient

    async def api(self, path: str, **params: str) -> Any:
        """The `data` of an HTTP API answer (`/api/v1/...`)."""
        response = await self.http.get(f"{self.url}{path}", params=params)
        response.raise_for_status()
        return response.json()["data"]

    async def alerts(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = (await self.api("/api/v1/alerts"))["alerts"]
        return found

    async def alert_rules(self) -> list[dict[str, Any]]:
        groups = (await self.api("/api/v1/rules", type="alert"))["groups"]
        return [rule for group in groups for rule in group["rules"]]

    async def until(self, what: str, check: Callable[[], Awaitable[T | None]], within: float) -> T:
        """check()'s first result that is not None (HTTP errors count as not yet), polled while Prometheus
        runs, for at most `within` seconds; the failure shows the end of its log."""
        deadline = time.monotonic() + within
        while True:
            with contextlib.suppress(httpx.HTTPError):
                result = await check()
                if result is not None:
                    return result
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-LOG_TAIL_CHARS:]
                ended = (
                    f"Prometheus exited ({self.process.returncode})" if self.process.poll() else "timed out"
                )
                raise AssertionError(f"{what}: not within {within:.0f}s ({ended}); Prometheus's log:\n{tail}")
            await asyncio.sleep(POLL_SECONDS)


@contextlib.asynccontextmanager
async def private_prometheus(
    directory: Path,
    *,
    rule_files: Sequence[Path] = (),
    scrape_configs: Sequence[dict[str, Any]] = (),
    interval_seconds: float = 1.0,
    self_scrape: bool = False,
) -> AsyncIterator[PrivatePrometheus]:
    """Prometheus on 127.0.0.1:<free port>, scraping `scrape_configs` (and itself, job `prometheus`, with
    `self_scrape`) and evaluating `rule_files` every `interval_seconds`; ready (`/-/ready`) when yielded."""
    binary = await asyncio.to_thread(prometheus_binary)
    directory.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, before anything runs
    interval = f"{int(interval_seconds * 1000)}ms"
    port = free_port()
    itself = {"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
    config = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [*scrape_configs, *([itself] if self_scrape else [])],
    }
    config_file = directory / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    log = directory / "prometheus.log"
    command = prometheus_command(binary, config_file, port, directory / "data")
    with log.open("wb") as out:
        # Popen returns at once; the server is waited for below, without blocking the loop.
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=directory)  # noqa: ASYNC220
    try:
        async with httpx.AsyncClient(timeout=3.0) as http:
            prometheus = PrivatePrometheus(f"http://127.0.0.1:{port}", process, log, http)

            async def ready() -> bool | None:
                return (await http.get(f"{prometheus.url}/-/ready")).status_code == 200 or None

            await prometheus.until("Prometheus ready", ready, START_TIMEOUT_SECONDS)
            yield prometheus
    finally:
        await asyncio.to_thread(stop_process, process, STOP_TIMEOUT_SECONDS)


def alert_entry(
    name: str,
    state: str,
    active_at: str,
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
    value: str = "1e+00",
) -> dict[str, Any]:
    """One alert of a `/api/v1/alerts` answer, exactly as Prometheus writes it (tests/integration/console
    compares a real answer with one built here: the console's tests serve these as a fake Prometheus)."""
    return {
        "labels": {"alertname": name, **labels},
        "annotations": annotations or {},
        "state": state,
        "activeAt": active_at,
        "value": value,
    }


def alerts_answer(*alerts: dict[str, Any]) -> dict[str, Any]:
    return {"status": "success", "data": {"alerts": list(alerts)}}
