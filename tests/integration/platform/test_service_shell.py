"""The shared process shell as a real process: migrate, serve, health, metrics, relay, SIGTERM, bad config."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.support.bell_process import wait_healthy
from tests.support.kafka import wait_until
from tests.support.stack import Stack, free_port, private_file, runtime_dsn_for
from tests.support.tls import self_signed
from yovision_platform.messaging import Outbox, OutboxMessage
from yovision_platform.storage import Identifier
from yovision_platform.tools.jaeger import private_jaeger

DEMO = Path(__file__).with_name("demo_service.py")
REPO_ROOT = Path(__file__).resolve().parents[3]


class Demo:
    def __init__(self, stack: Stack, schema: Identifier, tmp_path: Path) -> None:
        self.password = secrets.token_hex(16)
        self.runtime_dsn = runtime_dsn_for(stack.admin_dsn, f"{schema}_app", self.password)
        self.port = free_port()
        self.env = {
            **os.environ,
            "YOVISION_TEST_DEMO_SCHEMA": schema,
            "DEMO_HTTP_PORT": str(self.port),
            "DEMO_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
            "DEMO_DATABASE_DSN_FILE": str(private_file(tmp_path / "runtime.dsn", self.runtime_dsn + "\n")),
            "DEMO_MIGRATION_DSN_FILE": str(private_file(tmp_path / "admin.dsn", stack.admin_dsn + "\n")),
        }

    def run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(DEMO), *args],
            env=env or self.env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )


@pytest.fixture
def demo(stack: Stack, schema_name: Identifier, tmp_path: Path) -> Demo:
    return Demo(stack, schema_name, tmp_path)


async def test_serve_answers_health_publishes_the_outbox_and_stops_cleanly_on_sigterm(
    demo: Demo, schema_name: Identifier, tmp_path: Path
) -> None:
    first = demo.run("migrate")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["applied"] == [
        "platform/0001_outbox",
        "platform/0002_idempotent_consumer",
        "platform/0003_outbox_cursors",
        "platform/0004_processed_events_retention",
        "platform/0005_outbox_xid_statistics",
        "platform/0006_outbox_cursor_one_snapshot",
        "service/0001_test_service",
    ]
    assert json.loads(demo.run("migrate").stdout)["applied"] == []

    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log_file:
        process = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, not awaited here
            [sys.executable, str(DEMO), "serve"],
            env=demo.env,
            cwd=REPO_ROOT,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{demo.port}"
        async with httpx.AsyncClient(base_url=base, timeout=5) as client:
            await wait_healthy(client)
            ready = await client.get("/readyz")
            assert ready.status_code == 200
            assert ready.json()["checks"] == {"database": "ok", "worker:outbox-relay": "ok"}

            pool = await asyncpg.create_pool(demo.runtime_dsn, min_size=1, max_size=2)
            try:
                async with pool.acquire() as conn, conn.transaction():
                    await Outbox(schema_name).enqueue(
                        conn,
                        OutboxMessage(uuid.uuid4(), "SmokeTestEvent", "platform.smoke.v1", b"demo", b"value"),
                    )

                async def published() -> bool:
                    return bool(
                        await pool.fetchval(
                            f"""SELECT pg_visible_in_snapshot(o.xid, c.prev_snapshot)
                                  FROM "{schema_name}".outbox o JOIN "{schema_name}".outbox_cursors c
                                    ON c.outbox = 'outbox' AND c.shard = o.shard"""
                        )
                    )

                await wait_until(published, timeout_seconds=30)
            finally:
                await pool.close()

            # The relay counts a batch once its cursor update is back from the pool, a moment after the
            # database shows the cursor past the row: wait for the count, do not race it.
            async def counted() -> bool:
                return "outbox_relay_published_total 1.0" in (await client.get("/metrics")).text

            await wait_until(counted, timeout_seconds=10)
            metrics = (await client.get("/metrics")).text
            assert 'yovision_build_info{instance_id="' in metrics
            assert demo.password not in metrics
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert time.monotonic() - started < 25
    finally:
        if process.poll() is None:
            process.kill()
    log_text = log_path.read_text()
    assert demo.password not in log_text
    assert '"msg":"service stopped"' in log_text


@contextlib.contextmanager
def serving(demo: Demo, log_path: Path, **settings: str) -> Iterator[subprocess.Popen[bytes]]:
    """`serve` with `settings` (DEMO_ env vars) added; killed on exit if still running."""
    with log_path.open("w") as log_file:
        process = subprocess.Popen(
            [sys.executable, str(DEMO), "serve"],
            env={**demo.env, **settings},
            cwd=REPO_ROOT,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_a_traced_request_reaches_the_trace_store_with_its_query_and_health_checks_do_not(
    demo: Demo, tmp_path: Path
) -> None:
    assert demo.run("migrate").returncode == 0
    trace_id = secrets.token_hex(16)
    with (
        private_jaeger(tmp_path / "jaeger") as jaeger,
        serving(demo, tmp_path / "serve.log", DEMO_TRACING_OTLP_ENDPOINT=jaeger.otlp_http_url) as process,
    ):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{demo.port}", timeout=5) as client:
            await wait_healthy(client)
            await client.get("/readyz")
            traceparent = f"00-{trace_id}-{secrets.token_hex(8)}-01"
            answer = await client.get("/v1/ping", headers={"traceparent": traceparent})
            assert answer.json() == {"answer": 42}
        found = await asyncio.to_thread(jaeger.wait_for_trace, trace_id, spans=2)
        assert {span["operationName"] for span in found["spans"]} >= {"GET /v1/ping", "SELECT"}
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        async with httpx.AsyncClient(base_url=jaeger.query_url, timeout=5) as query:
            searched = (await query.get("/api/traces", params={"service": "demo-service"})).json()
        operations = {s["operationName"] for t in searched["data"] for s in t["spans"]}
        assert not operations & {"GET /healthz", "GET /readyz", "GET /metrics"}, (
            "health checks are not traced"
        )
        assert not any(
            len(t["spans"]) == 1 and t["spans"][0]["operationName"] == "SELECT" for t in searched["data"]
        ), "a bare query (the readiness check's) starts no trace"


async def test_with_the_trace_store_down_requests_are_served_and_the_process_stops_in_time(
    demo: Demo, tmp_path: Path
) -> None:
    assert demo.run("migrate").returncode == 0
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens: every export is refused
    log_path = tmp_path / "serve.log"
    with serving(demo, log_path, DEMO_TRACING_OTLP_ENDPOINT=nobody) as process:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{demo.port}", timeout=5) as client:
            await wait_healthy(client)
            took = []
            for _ in range(300):  # a span queue's worth and more, over several export rounds
                started = time.monotonic()
                assert (await client.get("/v1/ping")).status_code == 200
                took.append(time.monotonic() - started)
        assert sorted(took)[int(len(took) * 0.99)] < 0.5, "no request waits for the dead trace store"
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        # The queued spans get at most SHUTDOWN_FLUSH_SECONDS (2 s), not an export timeout per batch (14 s).
        assert time.monotonic() - started < 10
    assert '"msg":"service stopped"' in log_path.read_text()


def test_a_missing_secret_file_stops_start_up_naming_the_setting(demo: Demo, tmp_path: Path) -> None:
    env = {**demo.env, "DEMO_DATABASE_DSN_FILE": str(tmp_path / "absent.dsn")}
    result = demo.run("check-config", env=env)
    assert result.returncode == 2
    assert "DEMO_DATABASE_DSN_FILE" in result.stderr and "missing" in result.stderr


def test_a_malformed_dsn_stops_start_up_without_printing_it(demo: Demo, tmp_path: Path) -> None:
    secret_dsn = f"mysql://admin:{demo.password}@db.example/prod"
    env = {**demo.env, "DEMO_DATABASE_DSN_FILE": str(private_file(tmp_path / "bad.dsn", secret_dsn))}
    result = demo.run("check-config", env=env)
    assert result.returncode == 2
    assert "DEMO_DATABASE_DSN_FILE" in result.stderr
    assert demo.password not in result.stderr + result.stdout and "db.example" not in result.stderr


@pytest.mark.parametrize(("key_bytes", "accepted"), [(31, False), (32, True), (33, True)])
def test_signing_key_length_boundary(demo: Demo, tmp_path: Path, key_bytes: int, accepted: bool) -> None:
    key_hex = secrets.token_hex(key_bytes)
    env = {**demo.env, "DEMO_SIGNING_KEY_FILE": str(private_file(tmp_path / "key.hex", key_hex + "\n"))}
    result = demo.run("check-config", env=env)
    assert (result.returncode == 0) is accepted, result.stderr
    if not accepted:
        assert result.returncode == 2 and "DEMO_SIGNING_KEY_FILE" in result.stderr
    assert key_hex not in result.stderr + result.stdout


def test_an_invalid_port_names_the_setting_not_the_value(demo: Demo) -> None:
    result = demo.run("check-config", env={**demo.env, "DEMO_HTTP_PORT": "99999"})
    assert result.returncode == 2 and "DEMO_HTTP_PORT" in result.stderr and "99999" not in result.stderr


def test_serve_refuses_a_superuser_runtime_role(demo: Demo, stack: Stack, tmp_path: Path) -> None:
    assert demo.run("migrate").returncode == 0
    env = {**demo.env, "DEMO_DATABASE_DSN_FILE": str(private_file(tmp_path / "su.dsn", stack.admin_dsn))}
    result = demo.run("serve", env=env)
    assert result.returncode == 3
    assert "unsafe_runtime_role" in result.stderr


def test_serve_refuses_an_unmigrated_schema(demo: Demo) -> None:
    result = demo.run("serve")
    assert result.returncode == 3
    # the runtime role does not exist before migrate: refused cleanly, naming only the error class
    assert "database_error (SQLSTATE 28P01)" in result.stderr  # invalid_password: only the code is shown
    assert demo.password not in result.stderr


async def test_serve_speaks_tls_with_a_certificate_and_its_key(demo: Demo, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path, "server")
    env = {**demo.env, "DEMO_HTTP_TLS_CERT_FILE": str(cert), "DEMO_HTTP_TLS_KEY_FILE": str(key)}
    assert demo.run("migrate", env=env).returncode == 0
    with (tmp_path / "serve.log").open("w") as log_file:
        process = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, not awaited here
            [sys.executable, str(DEMO), "serve"],
            env=env,
            cwd=REPO_ROOT,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        trusted = ssl.create_default_context(cafile=str(cert))
        async with httpx.AsyncClient(base_url=f"https://127.0.0.1:{demo.port}", verify=trusted) as client:
            await wait_healthy(client)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{demo.port}") as plain:
            with pytest.raises(httpx.TransportError):  # no plain HTTP on a TLS port
                await plain.get("/healthz")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize(
    ("files", "setting", "reason"),
    [
        (("cert",), "DEMO_HTTP_TLS_KEY_FILE", "missing"),
        (("key",), "DEMO_HTTP_TLS_CERT_FILE", "missing"),
        (("cert", "other-key"), "DEMO_HTTP_TLS_CERT_FILE", "tls_invalid"),
        (("key-as-cert", "key"), "DEMO_HTTP_TLS_CERT_FILE", "tls_invalid"),
        (("cert", "readable-key"), "DEMO_HTTP_TLS_KEY_FILE", "world_accessible"),
    ],
)
def test_tls_files_are_checked_at_start_up(
    demo: Demo, tmp_path: Path, files: tuple[str, ...], setting: str, reason: str
) -> None:
    cert, key = self_signed(tmp_path, "server")
    _, other_key = self_signed(tmp_path, "other")
    readable_key = tmp_path / "readable.key"
    readable_key.write_bytes(key.read_bytes())
    readable_key.chmod(0o644)
    paths = {"cert": ("CERT", cert), "key": ("KEY", key), "other-key": ("KEY", other_key),
             "key-as-cert": ("CERT", key), "readable-key": ("KEY", readable_key)}  # fmt: skip
    env = {**demo.env, **{f"DEMO_HTTP_TLS_{paths[f][0]}_FILE": str(paths[f][1]) for f in files}}
    result = demo.run("check-config", env=env)
    assert result.returncode == 2
    assert setting in result.stderr and reason in result.stderr
    assert "PRIVATE KEY" not in result.stderr + result.stdout


def test_check_config_accepts_a_matching_certificate_and_key(demo: Demo, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path, "server")
    env = {**demo.env, "DEMO_HTTP_TLS_CERT_FILE": str(cert), "DEMO_HTTP_TLS_KEY_FILE": str(key)}
    assert demo.run("check-config", env=env).returncode == 0
