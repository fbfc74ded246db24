"""Faults seen from outside a real sense-reconciler process: PostgreSQL going away and coming back, and a
client that stalls its request body. PostgreSQL is taken away through a TCP proxy the test cuts, never by
stopping the shared server."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from tests.integration.sense_reconciler.test_processes import (
    SenseProcess,
    eventually,
    operator_headers,
    ready,
    sense_env,
)
from tests.support.stack import MigratedSchema, Stack, private_file, problem_code
from tests.support.tcp_proxy import TcpProxy

__all__ = ["operator_headers", "sense_env"]  # the fixtures, re-used from the process tests

BODY_READ_DEADLINE_SECONDS = 10.0
KAFKA_OUTAGE_SECONDS = 20.0
# Before the fix a 39 s outage wrote 4,550 lines; start-up, a few supervised restarts and one line per
# repeated warning per minute stay far below this.
MAX_LOG_LINES_DURING_OUTAGE = 80


def device_body() -> dict[str, str]:
    path = f"t-{uuid.uuid4().hex[:12]}"
    return {
        "tenant_id": "tenant-a",
        "site_id": "site-1",
        "name": "cam",
        "path_name": path,
        "source_uri": f"rtsp://127.0.0.1:1/{path}",
    }


def through(dsn: str, proxy: TcpProxy) -> str:
    parts = urlsplit(dsn)
    netloc = parts.netloc.rsplit("@", 1)[0] + f"@127.0.0.1:{proxy.port}"
    return urlunsplit(parts._replace(netloc=netloc))


async def test_postgres_down_gives_503_and_not_ready_then_the_process_recovers_by_itself(
    stack: Stack,
    sense_env: dict[str, str],
    operator_headers: dict[str, str],
    sense_schema: MigratedSchema,
    tmp_path: Path,
) -> None:
    target = urlsplit(sense_schema.runtime_dsn)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 5432)
    dsn_file = private_file(tmp_path / "proxied.dsn", through(sense_schema.runtime_dsn, proxy) + "\n")
    process = SenseProcess(
        {**sense_env, "SENSE_DATABASE_DSN_FILE": str(dsn_file)}, "sense-pg", tmp_path / "p.log"
    )
    async with proxy.running():
        process.start()
        try:
            async with httpx.AsyncClient(base_url=process.url, headers=operator_headers, timeout=15) as api:
                await eventually(lambda: ready(api))
                created = await api.post("/v1/devices", json=device_body())
                assert created.status_code == 201, created.text
                device_id = created.json()["id"]

                await proxy.cut()
                refused = await api.post("/v1/devices", json=device_body())
                assert (refused.status_code, problem_code(refused)) == (503, "database_unavailable")
                assert refused.headers["retry-after"] == "5"
                read = await api.get(f"/v1/devices/{device_id}")
                assert (read.status_code, problem_code(read)) == (503, "database_unavailable")
                readiness = await api.get("/readyz")
                assert readiness.status_code == 503
                assert readiness.json()["checks"]["database"] != "ok"
                assert (await api.get("/healthz")).status_code == 200  # liveness: a restart would not help

                await proxy.restore()
                await eventually(lambda: ready(api), within_seconds=60)
                again = await api.post("/v1/devices", json=device_body())
                assert again.status_code == 201, again.text
                assert (await api.get(f"/v1/devices/{device_id}")).status_code == 200
        finally:
            process.stop()
    log = process.log.read_text()
    assert "Exception in ASGI application" not in log
    assert "request refused: database unavailable" in log


async def test_a_stalled_request_body_is_answered_within_the_read_deadline(
    sense_env: dict[str, str], operator_headers: dict[str, str], tmp_path: Path
) -> None:
    process = SenseProcess(sense_env, "sense-stall", tmp_path / "s.log")
    process.start()
    try:
        async with httpx.AsyncClient(base_url=process.url) as api:
            await eventually(lambda: ready(api))
        reader, writer = await asyncio.open_connection("127.0.0.1", process.port)
        authorization = operator_headers["Authorization"]
        head = (
            f"POST /v1/devices HTTP/1.1\r\nHost: sense\r\nAuthorization: {authorization}\r\n"
            "Content-Type: application/json\r\nContent-Length: 65536\r\n\r\n"
        )
        started = time.monotonic()
        writer.write(head.encode() + b"{" + b" " * 99)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), BODY_READ_DEADLINE_SECONDS + 10)
        took = time.monotonic() - started
        rest = await asyncio.wait_for(reader.read(), 10)  # the server closes the connection after it
        writer.close()
        assert status_line.startswith(b"HTTP/1.1 408"), status_line
        assert BODY_READ_DEADLINE_SECONDS - 0.5 <= took < BODY_READ_DEADLINE_SECONDS + 10
        assert b'"code":"request_timeout"' in rest
    finally:
        process.stop()


async def test_kafka_unreachable_keeps_the_log_bounded_and_the_consumer_recovers_when_it_returns(
    stack: Stack, sense_env: dict[str, str], operator_headers: dict[str, str], tmp_path: Path
) -> None:
    broker = urlsplit(f"kafka://{stack.kafka_bootstrap}")
    proxy = TcpProxy(broker.hostname or "127.0.0.1", broker.port or 9092)  # closed until restored
    env = {**sense_env, "SENSE_KAFKA_BOOTSTRAP": f"127.0.0.1:{proxy.port}"}
    process = SenseProcess(env, "sense-kafka", tmp_path / "k.log")
    process.start()
    try:
        async with httpx.AsyncClient(base_url=process.url, headers=operator_headers) as api:

            async def consumer_down() -> bool:
                response = await api.get("/readyz")
                return (
                    response.status_code == 503
                    and response.json()["checks"]["worker:device-consumer"] == "down"
                )

            await eventually(consumer_down)
            await asyncio.sleep(KAFKA_OUTAGE_SECONDS)  # the outage itself: what it writes is measured
            lines_during_outage = len(process.log.read_text().splitlines())
            assert lines_during_outage < MAX_LOG_LINES_DURING_OUTAGE, lines_during_outage
            created = await api.post("/v1/devices", json=device_body())
            assert created.status_code == 201  # the API does not need Kafka: the outbox holds the event
            async with proxy.running():
                await eventually(lambda: ready(api), within_seconds=90)
    finally:
        process.stop()
