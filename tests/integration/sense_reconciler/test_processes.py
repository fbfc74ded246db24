"""Two sense-reconciler processes in one consumer group, over real PostgreSQL, Kafka and MediaMTX; their
Control API takes the access tokens of a real ORY Hydra (the session's `hydra` is `SENSE_AUTH_ISSUER`)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sense_reconciler.adapters.mediamtx import MediaMtxClient
from sense_reconciler.settings import AUDIENCE
from tests.support.issuers import HydraIssuer
from tests.support.mediamtx_proxy import MediaMtxProxy
from tests.support.stack import (
    MigratedSchema,
    Stack,
    create_topic,
    delete_topic,
    free_port,
    private_file,
    problem_code,
)
from yovision_platform.messaging import partition_for_key

SCRIPT = Path(__file__).with_name("sense_process.py")
REPO_ROOT = Path(__file__).resolve().parents[3]
OPERATOR_CLIENT = "operator-cli"  # a machine client of the environment: its id is the audit actor
PARTITIONS = 4
MAX_DEVICES = 100  # server-chosen ids; covering 4 partitions takes ~8 on average, more than 100 ~1e-11
SECRET = "proc-secret-pw"
ALLOWED_LABELS = {
    "result",
    "media_server",  # an operator-registered, validated server id (never a URL)
    "reason",  # also access_token_refusals_total's: malformed, unknown_kid, invalid
    "outcome",  # jwks_fetches_total: fetched, failed
    "service",
    "version",
    "instance_id",
    "le",
    "implementation",
    "major",
    "minor",
    "patchlevel",
}


class SenseProcess:
    def __init__(self, env: dict[str, str], instance: str, log: Path) -> None:
        self.port = free_port()
        self.instance = instance
        self.log = log
        self.env = {**env, "SENSE_HTTP_PORT": str(self.port), "SENSE_INSTANCE_ID": instance}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(SCRIPT), "serve"], env=self.env, cwd=REPO_ROOT, stdout=out, stderr=out
            )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def metrics(self) -> dict[str, float]:
        async with httpx.AsyncClient() as client:
            text = (await client.get(f"{self.url}/metrics")).text
        values: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                values[f"{sample.name}{{{labels}}}"] = sample.value
        return values

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def eventually(check: Callable[[], Awaitable[bool]], within_seconds: float = 40.0) -> None:
    deadline = time.monotonic() + within_seconds
    while True:
        try:
            if await check():
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.3)


@pytest.fixture
async def operator_headers(hydra: HydraIssuer) -> dict[str, str]:
    """The operator CLI's `client_credentials` token from Hydra: both of Sense's permissions."""
    token = await hydra.machine_token(OPERATOR_CLIENT, ["sense:operate", "sense:read"], [AUDIENCE])
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def sense_env(
    stack: Stack, hydra: HydraIssuer, sense_schema: MigratedSchema, tmp_path: Path
) -> AsyncIterator[dict[str, str]]:
    topic = f"test.device.{uuid.uuid4().hex[:10]}.v1"
    await create_topic(stack.kafka_bootstrap, topic, partitions=PARTITIONS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENSE_")}
    env.update(
        {
            "SENSE_TEST_SCHEMA": sense_schema.name,
            "SENSE_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
            "SENSE_DATABASE_DSN_FILE": str(
                private_file(tmp_path / "runtime.dsn", sense_schema.runtime_dsn + "\n")
            ),
            "SENSE_AUTH_ISSUER": hydra.issuer,
            "SENSE_MEDIA_SERVERS": stack.media_servers_setting(),
            "SENSE_SECRETS_KEY_FILES": json.dumps(
                {"k1": str(private_file(tmp_path / "k1.key", secrets.token_hex(32) + "\n"))}
            ),
            "SENSE_DEVICE_TOPIC": topic,
            "SENSE_DEVICE_TOPIC_PARTITIONS": str(PARTITIONS),
            "SENSE_CONSUMER_GROUP": f"sense-reconciler-test-{uuid.uuid4().hex[:8]}",
            # The outbox relay would also publish audit/ownership events to the shared topics; wake-ups come
            # from the due-row scan here (the Kafka wake-up path is covered by test_ownership.py).
            "SENSE_OUTBOX_RELAY_ENABLED": "false",
            "SENSE_SCAN_INTERVAL_SECONDS": "0.2",
            "SENSE_LEASE_SECONDS": "3",
            "SENSE_OPERATION_DEADLINE_SECONDS": "1",
        }
    )
    yield env
    await delete_topic(stack.kafka_bootstrap, topic)


def through_proxy(stack: Stack, url: str) -> str:
    """The stack's single MediaMTX registration (same id, same credentials) reached through `url`."""
    registration = json.loads(stack.media_servers_setting())
    (entry,) = registration.values()
    return json.dumps({server: {**entry, "api_url": url} for server in registration})


async def test_two_processes_split_devices_and_survive_a_kill(
    stack: Stack, sense_env: dict[str, str], operator_headers: dict[str, str], tmp_path: Path
) -> None:
    a = SenseProcess(sense_env, "sense-proc-a", tmp_path / "a.log")
    b = SenseProcess(sense_env, "sense-proc-b", tmp_path / "b.log")
    mediamtx = MediaMtxClient(
        stack.mediamtx_api_url, credentials=stack.mediamtx_credentials(), deadline_seconds=5.0
    )
    paths: list[str] = []
    try:
        a.start()
        b.start()

        async def split() -> bool:
            owned = [(await p.metrics())["sense_reconcile_owned_partitions{}"] for p in (a, b)]
            return min(owned) >= 1 and sum(owned) == PARTITIONS

        await eventually(split)
        async with httpx.AsyncClient(base_url=a.url, headers=operator_headers) as api:
            # The server picks device ids: devices are added until every partition holds one, so both
            # processes (each owning at least one partition) always have a device to converge. Covering
            # 4 partitions needs more than the default 16 channels of a site in ~4% of runs.
            site = await api.put("/v1/sites/tenant-a/site-1", json={"max_video_channels": MAX_DEVICES})
            assert site.status_code == 200, site.text
            ids: list[str] = []
            covered: set[int] = set()
            while len(covered) < PARTITIONS:
                assert len(ids) < MAX_DEVICES, "device ids did not cover every partition"
                path = f"t-{uuid.uuid4().hex[:12]}"
                paths.append(path)
                body = {
                    "tenant_id": "tenant-a",
                    "site_id": "site-1",
                    "name": f"cam {len(ids)}",
                    "path_name": path,
                    "source_uri": f"rtsp://admin:{SECRET}@127.0.0.1:1/{path}",
                    "desired_state": "enabled",
                }
                response = await api.post("/v1/devices", json=body)
                assert response.status_code == 201, response.text
                ids.append(response.json()["id"])
                covered.add(partition_for_key(ids[-1].encode(), PARTITIONS))

            async def all_status(expected_generation: int) -> bool:
                statuses = [(await api.get(f"/v1/devices/{i}/reconcile-status")).json() for i in ids]
                return all(
                    s["status"] == "converged" and s["observed_generation"] == expected_generation
                    for s in statuses
                )

            await eventually(lambda: all_status(1))
            converged = [
                (await p.metrics())["sense_reconcile_items_total{media_server=default,result=converged}"]
                for p in (a, b)
            ]
            assert sum(converged) == len(ids)
            assert min(converged) >= 1
            assert [await mediamtx.get_path(p) is not None for p in paths] == [True] * len(paths)

            assert b.proc is not None
            b.proc.send_signal(signal.SIGKILL)
            b.proc.wait()

            async def a_owns_everything() -> bool:
                return (await a.metrics())["sense_reconcile_owned_partitions{}"] == PARTITIONS

            await eventually(a_owns_everything)
            items = [{"device_id": i, "desired_state": "disabled"} for i in ids]
            assert (await api.post("/v1/devices:set-desired-state", json={"items": items})).status_code == 200
            await eventually(lambda: all_status(2))
            assert [await mediamtx.get_path(p) for p in paths] == [None] * len(paths)
            after = (await a.metrics())["sense_reconcile_items_total{media_server=default,result=converged}"]
            assert after - converged[0] == len(ids)
            async with httpx.AsyncClient() as client:
                scrape = (await client.get(f"{a.url}/metrics")).text
        for forbidden in (*ids, *paths, SECRET, "tenant-a", "site-1"):
            assert forbidden not in scrape
        for family in text_string_to_metric_families(scrape):
            for sample in family.samples:
                assert set(sample.labels) <= ALLOWED_LABELS, sample
        for log in (a.log, b.log):
            assert SECRET not in log.read_text()
    finally:
        a.stop()
        b.stop()
        for path in paths:
            await mediamtx.delete_path(path)
        await mediamtx.aclose()


async def test_a_paused_process_is_fenced_out_after_takeover_and_calls_nothing_more(
    stack: Stack, sense_env: dict[str, str], operator_headers: dict[str, str], tmp_path: Path
) -> None:
    proxy = MediaMtxProxy(stack.mediamtx_api_url)
    mediamtx = MediaMtxClient(
        stack.mediamtx_api_url, credentials=stack.mediamtx_credentials(), deadline_seconds=5.0
    )
    path = f"t-{uuid.uuid4().hex[:12]}"
    async with proxy.running():
        paused = SenseProcess(
            {**sense_env, "SENSE_MEDIA_SERVERS": through_proxy(stack, proxy.url)},
            "sense-paused",
            tmp_path / "p.log",
        )
        successor = SenseProcess(sense_env, "sense-successor", tmp_path / "s.log")
        try:
            paused.start()

            async def owns_all() -> bool:
                return (await paused.metrics())["sense_reconcile_owned_partitions{}"] == PARTITIONS

            await eventually(owns_all)
            proxy.hold_next()
            headers = operator_headers
            async with httpx.AsyncClient(base_url=paused.url, headers=headers) as api:
                body = {
                    "tenant_id": "tenant-a",
                    "site_id": "site-1",
                    "name": "cam",
                    "path_name": path,
                    "source_uri": "rtsp://127.0.0.1:1/x",
                    "desired_state": "enabled",
                }
                response = await api.post("/v1/devices", json=body)
                assert response.status_code == 201
                device_id = response.json()["id"]
            await asyncio.wait_for(proxy.held.wait(), 10)  # the paused process is inside its first call
            assert paused.proc is not None
            paused.proc.send_signal(signal.SIGSTOP)
            successor.start()
            async with httpx.AsyncClient(base_url=successor.url, headers=headers) as api:

                async def converged_by_successor() -> bool:
                    status = (await api.get(f"/v1/devices/{device_id}/reconcile-status")).json()
                    return bool(status["status"] == "converged")

                await eventually(converged_by_successor, within_seconds=60)
            assert await mediamtx.get_path(path) is not None
            calls_before_resume = len(proxy.calls)
            proxy.release_with_404()  # the stale answer: "path missing", which would tempt an add
            paused.proc.send_signal(signal.SIGCONT)

            async def lease_lost_recorded() -> bool:
                return (await paused.metrics())[
                    "sense_reconcile_items_total{media_server=default,result=lease_lost}"
                ] >= 1

            await eventually(lease_lost_recorded)
            metrics = await paused.metrics()
            assert metrics["sense_reconcile_items_total{media_server=default,result=converged}"] == 0
            assert metrics["sense_reconcile_items_total{media_server=default,result=failed}"] == 0
            assert len(proxy.calls) == calls_before_resume == 1
            assert await mediamtx.get_path(path) is not None
        finally:
            if paused.proc is not None and paused.proc.poll() is None:
                paused.proc.send_signal(signal.SIGCONT)
            paused.stop()
            successor.stop()
            await mediamtx.delete_path(path)
            await mediamtx.aclose()


@pytest.mark.parametrize(
    ("overrides", "exit_code"),
    [
        ({}, 0),
        ({"SENSE_OPERATION_DEADLINE_SECONDS": "3"}, 2),
        ({"SENSE_CLAIM_BATCH": "129"}, 2),
        ({"SENSE_INSTANCE_ID": "Not Valid"}, 2),
        ({"SENSE_AUTH_ISSUER": ""}, 2),
        ({"SENSE_AUTH_ISSUER": "http://issuer.example.org"}, 2),  # plain http off loopback
        ({"SENSE_AUTH_ALGORITHMS": "HS256"}, 2),
    ],
)
def test_start_up_refuses_invalid_reconcile_settings(
    sense_env: dict[str, str], overrides: dict[str, str], exit_code: int
) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "check-config"],
        env={**sense_env, **overrides},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == exit_code, result.stderr


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def ready(api: httpx.AsyncClient) -> bool:
    return (await api.get("/readyz")).status_code == 200


async def test_the_processes_api_takes_hydras_tokens_and_records_their_subjects(
    hydra: HydraIssuer, sense_env: dict[str, str], sense_schema: MigratedSchema, tmp_path: Path
) -> None:
    """Users sign in through Hydra; the operator CLI uses `client_credentials`. Each change's actor is the
    token's `sub`; another service's token, a read-only one and an `X-Actor` header change nothing."""
    env = {**sense_env, "SENSE_RECONCILER_ENABLED": "false"}
    process = SenseProcess(env, "sense-auth", tmp_path / "a.log")
    user = bearer(await hydra.user_token("alice@example.org", ["sense:operate"], [AUDIENCE]))
    reader = bearer(await hydra.user_token("bob", ["sense:read"], [AUDIENCE]))
    foreign = bearer(await hydra.user_token("alice", ["sense:operate"], ["bell-receiver"]))
    machine = bearer(await hydra.machine_token(OPERATOR_CLIENT, ["sense:operate"], [AUDIENCE]))
    body = {
        "tenant_id": "tenant-a",
        "site_id": "site-1",
        "name": "cam",
        "path_name": f"t-{uuid.uuid4().hex[:12]}",
        "source_uri": "rtsp://127.0.0.1:1/x",
        "desired_state": "disabled",
    }
    s = sense_schema.name.quoted
    conn = await asyncpg.connect(sense_schema.runtime_dsn)
    process.start()
    try:
        async with httpx.AsyncClient(base_url=process.url, timeout=20) as api:
            await eventually(lambda: ready(api))
            unauthorized = await api.post("/v1/devices", json=body)
            assert (unauthorized.status_code, problem_code(unauthorized)) == (401, "unauthorized")
            for headers in ({**user, "X-Actor": "operator:mallory"}, foreign):
                refused = await api.post("/v1/devices", json=body, headers=headers)
                assert (refused.status_code, refused.content) == (401, unauthorized.content)
            forbidden = await api.post("/v1/devices", json=body, headers=reader)
            assert (forbidden.status_code, problem_code(forbidden)) == (403, "forbidden")
            assert forbidden.json()["detail"] == "requires the permission sense:operate"
            assert await conn.fetchval(f"SELECT count(*) FROM {s}.devices") == 0
            created = await api.post("/v1/devices", json=body, headers=user)
            assert created.status_code == 201, created.text
            url = f"/v1/devices/{created.json()['id']}"
            enabled = await api.put(
                f"{url}/desired-state", json={"desired_state": "enabled"}, headers=machine
            )
            assert enabled.status_code == 200, enabled.text
            assert (await api.get(url, headers=reader)).json()["desired_state"] == "enabled"
        rows = await conn.fetch(f"SELECT actor FROM {s}.device_operation_outbox ORDER BY id")
        assert [r["actor"] for r in rows] == ["alice@example.org", OPERATOR_CLIENT]
    finally:
        process.stop()
        await conn.close()
