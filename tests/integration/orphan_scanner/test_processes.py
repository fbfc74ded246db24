"""orphan-scanner and `sense-orphan` as real processes: the installed CLI, exit codes, JSON output, two
`serve` processes sharing one scan lease (one report per interval between them), and the served read API
with the access tokens of a real Hydra (the session's `hydra` is the processes' `ORPHAN_AUTH_ISSUER`)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from orphan_scanner.entrypoints.http_reports import READ_PERMISSION
from orphan_scanner.settings import AUDIENCE
from tests.support.issuers import HydraIssuer
from tests.support.orphan_scanner_fixtures import Orphan
from tests.support.stack import (
    REPO_ROOT,
    MigratedSchema,
    Stack,
    free_port,
    private_file,
    problem_code,
    unique_name,
)
from yovision_platform.web import AUDIENCES, PERMISSIONS

SENSE_ORPHAN = REPO_ROOT / ".venv/bin/sense-orphan"
MODULE = "tests.integration.orphan_scanner.orphan_process"


def orphan_env(orphan: Orphan, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The env of `orphan`'s settings (the CLI never contacts the issuer; `serve` gets Hydra's in `extra`)."""
    dsn_file = private_file(tmp_path / "orphan-runtime.dsn", orphan.schema.runtime_dsn + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORPHAN_")}
    env.update(
        {
            "ORPHAN_TEST_SCHEMA": str(orphan.schema.name),
            "ORPHAN_DATABASE_DSN_FILE": str(dsn_file),
            "ORPHAN_KAFKA_BOOTSTRAP": orphan.settings.kafka_bootstrap,
            "ORPHAN_MEDIAMTX_API_URL": orphan.mediamtx.url,
            "ORPHAN_MEDIAMTX_CREDENTIALS_FILE": str(orphan.mediamtx.credentials_file),
            "ORPHAN_DEVICE_TOPIC": orphan.settings.device_topic,
            "ORPHAN_OWNERSHIP_TOPIC": orphan.settings.ownership_topic,
            "ORPHAN_CONSUMER_GROUP": orphan.settings.consumer_group,
            "ORPHAN_OUTBOX_RELAY_ENABLED": "false",
            "ORPHAN_AUTH_ISSUER": orphan.settings.auth_issuer,
            **extra,
        }
    )
    return env


def run_cli(env: dict[str, str], *args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", MODULE, "cli", *args], env=env, cwd=REPO_ROOT, capture_output=True, timeout=120
    )
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize("args", [["--help"], ["report", "--help"], ["apply", "--help"]])
def test_the_installed_cli_has_help_on_every_command(args: list[str]) -> None:
    done = subprocess.run([str(SENSE_ORPHAN), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "usage: sense-orphan" in done.stdout
    assert "--force" not in done.stdout


def test_bad_input_is_refused_before_anything_is_read() -> None:
    done = subprocess.run(
        [str(SENSE_ORPHAN), "apply", "--scan-id", "7", "--actor", "alice", "--confirm", "yes"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ["PATH"]},  # no settings at all: input is checked first
    )
    assert done.returncode == 2
    assert json.loads(done.stdout) == {
        "status": "invalid",
        "error_code": "invalid_scan_id",
        "deleted_nothing": True,
    }


async def test_report_and_apply_through_the_cli(orphan: Orphan, tmp_path: Path) -> None:
    await orphan.feed.stale("stale-1")
    await orphan.mediamtx.add_many(["stale-1", *[f"hand-{i}" for i in range(9)]])
    await orphan.caught_up()
    env = orphan_env(orphan, tmp_path)

    code, report = await asyncio.to_thread(run_cli, env, "report")
    assert code == 0, report
    assert report["counts"] == {"observed": 10, "in_use": 0, "owned_stale": 1, "unowned": 9}
    assert report["candidates"] == [{"media_server_id": "default", "path_name": "stale-1"}]
    assert report["gate_preview"] == {"allowed": True, "reason_code": None, "media_server_id": None}
    assert report["valid_for_seconds"] == 900

    apply = ["apply", "--scan-id", report["scan_id"], "--actor", "alice"]
    code, blocked = await asyncio.to_thread(run_cli, env, *apply, "--confirm", "delete it")
    assert (code, blocked["status"], blocked["reason_code"]) == (4, "blocked", "confirmation_mismatch")
    assert "stale-1" in await orphan.mediamtx.names()

    code, done = await asyncio.to_thread(run_cli, env, *apply, "--confirm", report["confirm"])
    assert (code, done["status"], done["counts"]) == (0, "completed", {"deleted": 1})
    hand_made = {f"hand-{i}" for i in range(9)}
    assert await orphan.mediamtx.settled(hand_made) == hand_made

    code, unknown = await asyncio.to_thread(
        run_cli,
        env,
        "apply",
        "--scan-id",
        "00000000-0000-4000-8000-000000000000",
        "--actor",
        "a",
        "--confirm",
        "x",
    )
    assert (code, unknown["error_code"]) == (3, "scan_not_found")


class Served:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = int(env["ORPHAN_HTTP_PORT"])
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", MODULE, "serve"],
            env=env,
            cwd=REPO_ROOT,
            stdout=self._log,
            stderr=self._log,
        )

    def wait_healthy(self, timeout_seconds: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "serve exited"
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("serve did not become ready")

    def metrics(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text

    def log_text(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def stop(self) -> int:
        self.process.terminate()
        code = self.process.wait(timeout=30)
        self._log.close()
        return code


def serve_two(orphan: Orphan, tmp_path: Path, issuer: str) -> Iterator[Served]:
    for n in range(2):
        env = orphan_env(
            orphan,
            tmp_path,
            ORPHAN_HTTP_PORT=str(free_port()),
            ORPHAN_SCAN_INTERVAL_SECONDS="2",
            ORPHAN_METRICS_REFRESH_SECONDS="1",
            ORPHAN_AUTH_ISSUER=issuer,
        )
        env["ORPHAN_INSTANCE_ID"] = unique_name(f"serve{n}").replace("_", "-")
        yield Served(env, tmp_path / f"serve-{n}.log")


SCANS_TO_SEE = 3
SHARED_SCAN_TIMEOUT_SECONDS = 60.0


async def periodic_reports(orphan_schema: MigratedSchema) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(orphan_schema.runtime_dsn)
    try:
        return await conn.fetch(
            "SELECT instance_id, created_at, owned_stale_count "
            f"FROM {orphan_schema.name.quoted}.scan_reports "
            "WHERE trigger = 'periodic' AND status = 'complete' ORDER BY created_at"
        )
    finally:
        await conn.close()


def shown_metrics(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("orphan_last", "orphan_projection"))]


def metrics_settled(text: str) -> bool:
    lines = shown_metrics(text)
    return (
        'orphan_last_scan_paths{class="observed",media_server="default"} 2.0' in lines
        and "orphan_projection_lag_messages 0.0" in lines
    )


async def test_two_serve_processes_share_one_scan_per_interval(
    orphan: Orphan, stack: Stack, orphan_schema: MigratedSchema, tmp_path: Path, hydra: HydraIssuer
) -> None:
    await orphan.stop_projection()  # the processes run their own projection consumer (same group)
    await orphan.feed.stale("stale-1")
    await orphan.mediamtx.add_many(["stale-1", "hand-1"])
    launched = time.monotonic()  # each process may scan as soon as it runs, before it answers /healthz
    processes = list(serve_two(orphan, tmp_path, hydra.issuer))
    try:
        for process in processes:
            await asyncio.to_thread(process.wait_healthy)
        deadline = time.monotonic() + SHARED_SCAN_TIMEOUT_SECONDS
        while True:
            rows = await periodic_reports(orphan_schema)
            metrics = [await asyncio.to_thread(p.metrics) for p in processes]
            seen = len(rows) >= SCANS_TO_SEE and rows[-1]["owned_stale_count"] == 1
            if seen and all(metrics_settled(text) for text in metrics):
                break
            assert time.monotonic() < deadline, (len(rows), [shown_metrics(t) for t in metrics])
            await asyncio.sleep(0.2)
        elapsed = time.monotonic() - launched
    finally:
        codes = [await asyncio.to_thread(p.stop) for p in processes]
    assert codes == [0, 0]
    rows = await periodic_reports(orphan_schema)
    # one report per 2 s interval at most, whichever instance wrote it (+1: a scan at the start)
    assert len(rows) <= elapsed / 2.0 + 2
    gaps = [(b["created_at"] - a["created_at"]).total_seconds() for a, b in itertools.pairwise(rows)]
    assert all(gap >= 2.0 for gap in gaps), gaps  # never two reports in one interval, whichever instance
    assert rows[-1]["owned_stale_count"] == 1  # the processes' own projection consumer saw Sense's events
    completed = [
        float(line.rsplit(" ", 1)[1])
        for text in metrics
        for line in text.splitlines()
        if line.startswith('orphan_scans_total{result="complete",trigger="periodic"}')
    ]
    assert sum(completed) >= 2


async def test_the_served_read_api_takes_hydras_access_tokens_for_its_audience_with_orphan_read(
    orphan: Orphan, tmp_path: Path, hydra: HydraIssuer
) -> None:
    """Through `serve`'s own verifier (`use_access_tokens`): a token for every other audience, with every
    permission, is the uniform 401; a token without `orphan:read` is 403; a user's and a machine client's
    token with it read the reports. No token reaches the log."""
    others = [audience for audience in AUDIENCES if audience != AUDIENCE]
    tokens = {
        "foreign": await hydra.user_token("operator", PERMISSIONS, others),
        "lacking": await hydra.user_token(
            "operator", [p for p in PERMISSIONS if p != READ_PERMISSION], [AUDIENCE]
        ),
        "user": await hydra.user_token("operator", [READ_PERMISSION], [AUDIENCE]),
        "machine": await hydra.machine_token("operator-cli", [READ_PERMISSION], [AUDIENCE]),
    }
    env = orphan_env(
        orphan,
        tmp_path,
        ORPHAN_HTTP_PORT=str(free_port()),
        ORPHAN_SCAN_ENABLED="false",
        ORPHAN_PROJECTION_ENABLED="false",
        ORPHAN_AUTH_ISSUER=hydra.issuer,
    )
    served = Served(env, tmp_path / "serve-read-api.log")
    try:
        await asyncio.to_thread(served.wait_healthy)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{served.port}", timeout=10) as http:

            async def get(name: str) -> httpx.Response:
                return await http.get("/v1/reports", headers={"authorization": f"Bearer {tokens[name]}"})

            foreign = await get("foreign")
            assert (foreign.status_code, problem_code(foreign)) == (401, "unauthorized")
            lacking = await get("lacking")
            assert (lacking.status_code, problem_code(lacking)) == (403, "forbidden")
            for name in ("user", "machine"):
                answer = await get(name)
                assert (answer.status_code, answer.json()) == (200, {"items": [], "next_cursor": None}), name
            metrics = (await http.get("/metrics")).text
            assert 'access_token_refusals_total{reason="invalid"} 1.0' in metrics
            assert 'jwks_fetches_total{outcome="fetched"} 1.0' in metrics
    finally:
        assert await asyncio.to_thread(served.stop) == 0
    log_text = served.log_text()
    assert not [name for name, token in tokens.items() if token in log_text]
