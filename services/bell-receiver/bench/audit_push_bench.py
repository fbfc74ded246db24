"""Benchmark: Sense outbox → Bell stored, end to end, against a raw multi-row INSERT; Bell batch latency.

    .venv/bin/python services/bell-receiver/bench/audit_push_bench.py [--facts 20000] [--batches 200]

On the local stack: migrates a fresh Sense schema and a fresh Bell schema (`bench_<hex>` each), starts a
private ORY Hydra (`tools.hydra.private_hydra`, the environment's clients) as Bell's issuer and the real Bell
as its own process on them (the test launcher tests/integration/bell_receiver/bell_process.py, with a bench
topic for its consumer), then

1. **baseline**: the same fact rows (payload and digest as Bell stores them) inserted by plain 100-row
   ``INSERT ... SELECT unnest`` statements into a scratch copy of ``audit_events``: the database ceiling;
2. **relay**: ``--facts`` facts (a few devices, many facts each) written to ``device_operation_outbox``,
   then 1 (and then 2) :class:`AuditPusher` with the production config run until every fact is
   delivered (the push's cursor has passed them); events/s from the workers' start to the cursor's last
   advance (``advanced_at``, database clock), and the ratio to (1). With one cursor, a second worker is a
   standby: the 2-worker run shows it costs nothing. While the workers run, the bench only asks whether the
   cursor has passed the run's last fact (one row; the facts share one transaction and go out in id
   order): counting the whole backlog every 20 ms took a third of a core of PostgreSQL from the relay it
   measured. After the run the backlog is counted once (0 pending), and every fact is checked stored in
   Bell exactly once;
3. **latency**: ``--batches`` signed 100-item batches of new facts sent one after another with the relay's
   :class:`BellClient`; p50/p95/p99 of the whole request (goal p99 <= 50 ms). Then the `bench` machine
   client's access token (`client_credentials`, `bell:audit-read`) reads the trail through Bell's API: the
   newest Sense fact is the last one sent, with the actor the fact carried.

Prints a table, the goal lines (``goal: ... met`` / ``NOT met``, for every relay run) and a
``BENCH_JSON {...}`` line; stops Bell, deletes the topic and drops both schemas. A short count (a fact not
delivered, stored twice, still pending; a baseline row missing) is printed instead of the figure it
invalidates, and the bench exits 1 (`yovision_platform.tools.bench_runner.BenchCounts`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from aiokafka.admin import AIOKafkaAdminClient
from prometheus_client import CollectorRegistry

from bell_receiver.entrypoints.main import postgres_use_cases
from bell_receiver.service_layer.audit_batch_receiver import HTTP_OK
from bell_receiver.service_layer.metrics import BellMetrics
from sense_reconciler.adapters.audit_push_store import PostgresAuditPushStore
from sense_reconciler.adapters.bell_client import BellClient
from sense_reconciler.domain.audit_facts import OutboxFact, batch_body, fact_document
from sense_reconciler.domain.audit_push import BATCH_MAX_ITEMS, AuditPushConfig
from sense_reconciler.domain.audit_push_outcome import ItemResults, ItemStatus
from sense_reconciler.entrypoints.audit_push_worker import audit_push_worker
from sense_reconciler.entrypoints.main import SPEC as SENSE_SPEC
from sense_reconciler.settings import load_audit_push_config
from yovision_platform.localstack import LocalStack, runtime_dsn
from yovision_platform.security import VerifiedRequest
from yovision_platform.storage import Identifier, SchemaPlan, drop, migrate
from yovision_platform.tools import hydra, identity_provider
from yovision_platform.tools.bench_runner import BenchCounts, run_cleanly
from yovision_platform.tools.localhost import free_port, write_private_file
from yovision_platform.web import AUDIENCES

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the platform benchmarks' package (bench/)
from bench.infra import create_stack_topics  # topics replicated as the stack's

REPO_ROOT = Path(__file__).resolve().parents[3]
BELL_LAUNCHER = REPO_ROOT / "tests/integration/bell_receiver/bell_process.py"
# Paths, not imports: bell_receiver ships no py.typed marker, so mypy would not analyse it.
BELL_MIGRATIONS = REPO_ROOT / "services/bell-receiver/src/bell_receiver/migrations"
KEY_ID = "relay-bench-1"
CLIENTS = identity_provider.clients(hydra.UNSERVED_CONSOLE_URL, AUDIENCES)  # the environment's own
BELL_AUDIENCE = "bell-receiver"
AUDIT_READ_PERMISSION = "bell:audit-read"
BENCH_ACTOR = "operator:bench"
DEVICES = 8  # a few devices, many facts each
WORKER_COUNTS = (1, 2)
GOAL_RATIO = 0.3
GOAL_EVENTS_PER_SECOND = 10_000
GOAL_P99_MS = 50.0
BELL_START_TIMEOUT_SECONDS = 30.0
RUN_TIMEOUT_SECONDS = 60.0  # per relay run; the bench fails rather than hangs
POLL_SECONDS = 0.02

BASELINE_INSERT = """
    INSERT INTO {table} (source_system, event_id, event_type, action, actor, tenant_id, site_id, device_id,
                         occurred_at, channel, payload, payload_digest)
    SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                         $8::text[], $9::timestamptz[], $10::text[], $11::jsonb[], $12::bytea[])
"""


def bell_digest(document: dict[str, Any]) -> bytes:
    """``payload_digest`` as Bell computes it: SHA-256 of the sorted-key compact JSON
    (yovision_platform.audit_push.digest_of)."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).digest()


def percentile(sorted_values: list[float], fraction: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, max(0, round(len(sorted_values) * fraction) - 1))]


class BellServer:
    """The real Bell process on a bench schema and topic (env as tests/integration/bell_receiver)."""

    def __init__(
        self, stack: LocalStack, schema: Identifier, dsn: str, topic: str, secrets_dir: Path, issuer: str
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = secrets_dir / "bell.log"
        self.relay_key_file = write_private_file(secrets_dir / "relay.key", secrets.token_hex(32) + "\n")
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("BELL_")},
            "YOVISION_TEST_BELL_SCHEMA": schema,
            "YOVISION_TEST_BELL_TOPICS": topic,
            "YOVISION_TEST_BELL_GROUP": f"bell-bench-{uuid.uuid4().hex[:8]}",
            "BELL_HTTP_PORT": str(self.port),
            "BELL_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
            "BELL_DATABASE_DSN_FILE": str(write_private_file(secrets_dir / "runtime.dsn", dsn)),
            "BELL_MIGRATION_DSN_FILE": str(write_private_file(secrets_dir / "admin.dsn", stack.admin_dsn)),
            "BELL_AUDIT_PUSH_KEY_FILES": json.dumps({KEY_ID: str(self.relay_key_file)}),
            "BELL_AUTH_ISSUER": issuer,
        }
        self.process: subprocess.Popen[bytes] | None = None

    def launch(self) -> None:
        with self.log_path.open("a") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, str(BELL_LAUNCHER), "serve"],
                env=self.env,
                cwd=REPO_ROOT,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )

    async def wait_healthy(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + BELL_START_TIMEOUT_SECONDS
        async with httpx.AsyncClient(base_url=self.url, timeout=2) as http:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"bell exited: {self.log_path.read_text()[-2000:]}")
                with contextlib.suppress(httpx.TransportError):
                    if (await http.get("/healthz")).status_code == 200:
                        return
                await asyncio.sleep(0.1)
        raise RuntimeError("bell did not become healthy")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


async def kafka_topic(bootstrap: str, name: str, *, create: bool) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        if create:
            await create_stack_topics(admin, {name: 1})
        else:
            await admin.delete_topics([name])
    finally:
        await admin.close()


async def add_devices(admin: asyncpg.Connection, schema: Identifier) -> list[uuid.UUID]:
    s = schema.quoted
    await admin.execute(f"INSERT INTO {s}.sites (tenant_id, site_id) VALUES ('tenant-bench', 'site-1')")
    devices = [uuid.uuid4() for _ in range(DEVICES)]
    await admin.executemany(
        f"""INSERT INTO {s}.devices (id, tenant_id, site_id, name, path_name, source_uri, desired_state)
            VALUES ($1, 'tenant-bench', 'site-1', 'cam', $2, 'rtsp://127.0.0.1:1/cam', 'enabled')""",
        [(device, f"bench-{device.hex[:12]}") for device in devices],
    )
    return devices


async def add_facts(
    admin: asyncpg.Connection, schema: Identifier, devices: list[uuid.UUID], count: int
) -> None:
    """``count`` outbox facts (format 2), spread round-robin over ``devices``."""
    await admin.execute(
        f"""INSERT INTO {schema.quoted}.device_operation_outbox
                (event_id, fact_version, action, actor, device_id, tenant_id, site_id, changed_fields,
                 config_version)
            SELECT gen_random_uuid(), 2, 'device.config_changed', 'operator:bench', d.ids[1 + n % $2],
                   'tenant-bench', 'site-1', ARRAY['name', 'source_uri'], 1 + n
              FROM generate_series(0, $1 - 1) AS n, (SELECT $3::uuid[] AS ids) AS d""",
        count,
        len(devices),
        devices,
    )


async def pending_facts(admin: asyncpg.Connection, schema: Identifier) -> list[OutboxFact]:
    rows = await admin.fetch(
        f"""SELECT o.* FROM {schema.quoted}.device_operation_outbox o, {schema.quoted}.outbox_cursors c
             WHERE c.outbox = 'device_operation_outbox'
               AND NOT pg_visible_in_snapshot(o.xid, c.prev_snapshot) ORDER BY o.id"""
    )
    return [OutboxFact.from_row(dict(row.items())) for row in rows]


async def baseline(
    admin: asyncpg.Connection, bell_schema: Identifier, facts: list[OutboxFact], counts: BenchCounts
) -> float:
    """The same facts, stored as Bell stores them, by plain 100-row INSERTs into a scratch copy of
    ``audit_events`` (indexes and constraints included, no triggers); returns rows/second."""
    table = f"{bell_schema.quoted}.bench_raw_audit_events"
    await admin.execute(f"CREATE TABLE {table} (LIKE {bell_schema.quoted}.audit_events INCLUDING ALL)")
    documents = [fact_document(fact) for fact in facts]
    rows = [
        (
            "sense",
            fact.event_id,
            "DeviceAuditRecorded",
            fact.action,
            fact.actor,
            fact.tenant_id,
            fact.site_id,
            str(fact.device_id),
            fact.occurred_at,
            "http_relay",
            json.dumps(document),
            bell_digest(document),
        )
        for fact, document in zip(facts, documents, strict=True)
    ]
    sql = BASELINE_INSERT.format(table=table)
    started = time.monotonic()
    for offset in range(0, len(rows), BATCH_MAX_ITEMS):
        chunk = rows[offset : offset + BATCH_MAX_ITEMS]
        await admin.execute(sql, *(list(column) for column in zip(*chunk, strict=True)))
    seconds = time.monotonic() - started
    counts.expect("raw INSERT: rows stored", await admin.fetchval(f"SELECT count(*) FROM {table}"), len(rows))
    return len(rows) / seconds


PASSED_SQL = """
    SELECT pg_visible_in_snapshot(o.xid, c.prev_snapshot)
           OR (pg_visible_in_snapshot(o.xid, c.cur_snapshot) AND o.id <= c.last_id)
      FROM {schema}.device_operation_outbox o, {schema}.outbox_cursors c
     WHERE o.id = $1 AND c.outbox = 'device_operation_outbox'
"""


async def relay_run(
    pool: asyncpg.Pool,
    admin: asyncpg.Connection,
    sense_schema: Identifier,
    bell_schema: Identifier,
    config: AuditPushConfig,
    workers: int,
    facts: list[OutboxFact],
    counts: BenchCounts,
) -> tuple[float, bool]:
    """Run ``workers`` relay workers until the cursor has passed every pending fact; returns events/second
    and whether every fact was delivered exactly once (a short count is recorded in `counts`)."""
    stop = asyncio.Event()
    passed_sql = PASSED_SQL.format(schema=sense_schema.quoted)
    last_fact = facts[-1].row_id  # one transaction wrote them all; the cursor passes them in id order
    started_at = await admin.fetchval("SELECT clock_timestamp()")
    tasks = [
        asyncio.create_task(audit_push_worker(pool, sense_schema, config, owner=f"bench-{n}")(stop))
        for n in range(workers)
    ]
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
        while not await admin.fetchval(passed_sql, last_fact):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"relay with {workers} worker(s) did not finish in {RUN_TIMEOUT_SECONDS} s"
                )
            for task in tasks:
                if task.done():
                    task.result()
            await asyncio.sleep(POLL_SECONDS)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    finished_at = await admin.fetchval(
        f"SELECT advanced_at FROM {sense_schema.quoted}.outbox_cursors"
        " WHERE outbox = 'device_operation_outbox'"
    )
    observer = PostgresAuditPushStore(pool, sense_schema, "bench-observer", lease_seconds=1)
    pending = counts.expect(f"relay x{workers}: facts still pending", await observer.pending(), 0)
    stored = await admin.fetchval(
        f"SELECT count(*) FROM {bell_schema.quoted}.audit_events "
        "WHERE source_system = 'sense' AND event_id = ANY($1::uuid[])",
        [fact.event_id for fact in facts],
    )
    once = counts.expect(f"relay x{workers}: facts stored in Bell", stored, len(facts))
    return len(facts) / float((finished_at - started_at).total_seconds()), pending and once


async def latency(
    config: AuditPushConfig, batches: int, device: uuid.UUID, counts: BenchCounts
) -> tuple[list[float], bool]:
    """Seconds per signed 100-item batch of new facts of `device`, sent one after another, and whether
    Bell accepted every fact."""
    seconds: list[float] = []
    accepted = 0
    async with BellClient(config) as client:
        for batch in range(batches):
            facts = new_facts(device, first_row=batch * BATCH_MAX_ITEMS, at=datetime.now(UTC))
            started = time.perf_counter()
            answer = await client.send(facts)
            seconds.append(time.perf_counter() - started)
            if isinstance(answer, ItemResults):
                accepted += sum(item.status is ItemStatus.ACCEPTED for item in answer.items)
    whole = counts.expect("latency: facts accepted", accepted, batches * BATCH_MAX_ITEMS)
    return sorted(seconds), whole


async def newest_fact_read_with_a_bench_token(bell_url: str, token: str, device: uuid.UUID) -> None:
    """Bell's audit trail, read through its API with the `bench` client's access token: the newest Sense
    fact is one of the latency run's (of `device`), with the actor that fact carried."""
    async with httpx.AsyncClient(base_url=bell_url, timeout=10) as http:
        response = await http.get(
            "/v1/audit-events",
            params={"source_system": "sense", "limit": 1},
            headers={"authorization": f"Bearer {token}"},
        )
    if response.status_code != 200:
        raise RuntimeError(f"the audit trail answered {response.status_code} to the bench token")
    (newest,) = response.json()["items"]
    if (newest["device_id"], newest["actor"]) != (str(device), BENCH_ACTOR):
        raise RuntimeError("the newest fact read through the API is not the last one sent")


def new_facts(device: uuid.UUID, *, first_row: int, at: datetime) -> list[OutboxFact]:
    """A batch of 100 new facts of one device, as Sense's outbox holds them."""
    return [
        OutboxFact(
            row_id=first_row + n,
            event_id=uuid.uuid4(),
            fact_version=2,
            action="device.config_changed",
            actor=BENCH_ACTOR,
            device_id=device,
            tenant_id="tenant-bench",
            site_id="site-1",
            changed_fields=("name",),
            config_version=n + 1,
            occurred_at=at,
        )
        for n in range(BATCH_MAX_ITEMS)
    ]


def new_batch_body(device: uuid.UUID) -> bytes:
    """A 100-fact request body of new facts, as Sense sends it."""
    return batch_body(new_facts(device, first_row=0, at=datetime.now(UTC).replace(microsecond=0)))


async def handler_seconds(dsn: str, schema: Identifier, batches: int) -> list[float]:
    """Bell's use case alone (`AuditBatchReceiver.receive`: receipt, validation, the insert, the receipt
    write), in this process, no HTTP and no signature: where Bell's time per batch goes, apart from the web
    server."""
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    assert pool is not None
    receiver = postgres_use_cases(pool, schema, BellMetrics.create(CollectorRegistry())).audit_batches
    device = uuid.uuid4()
    seconds: list[float] = []
    try:
        for _ in range(batches):
            body = new_batch_body(device)
            digest = hashlib.sha256(body).hexdigest()
            verified = VerifiedRequest(KEY_ID, int(time.time()), secrets.token_hex(16), digest, digest)
            started = time.perf_counter()
            response = await receiver.receive(verified, body)
            seconds.append(time.perf_counter() - started)
            if response.status != HTTP_OK:
                raise RuntimeError(f"handler answered {response.status}")
    finally:
        await pool.close()
    return sorted(seconds)


async def bench(stack: LocalStack, fact_count: int, batches: int, counts: BenchCounts) -> dict[str, Any]:
    sense_plan = SchemaPlan.for_service(
        Identifier(f"bench_{uuid.uuid4().hex[:10]}"), SENSE_SPEC.migrations_dir
    )
    bell_plan = SchemaPlan.for_service(Identifier(f"bench_{uuid.uuid4().hex[:10]}"), BELL_MIGRATIONS)
    sense_password, bell_password = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    topic = f"bench.{uuid.uuid4().hex[:10]}.v1"
    admin = await asyncpg.connect(stack.admin_dsn)
    pool: asyncpg.Pool | None = None
    bell: BellServer | None = None
    topic_created = False
    results: dict[str, Any] = {"facts": fact_count, "devices": DEVICES, "batch_items": BATCH_MAX_ITEMS}
    try:
        with tempfile.TemporaryDirectory(prefix="relay-bench-") as secrets_dir:
            work_dir = Path(secrets_dir)
            (work_dir / "hydra").mkdir()
            async with hydra.private_hydra(stack.admin_dsn, work_dir / "hydra", CLIENTS) as identity:
                await migrate(admin, sense_plan, runtime_password=sense_password)
                await migrate(admin, bell_plan, runtime_password=bell_password)
                await kafka_topic(stack.kafka_bootstrap, topic, create=True)
                topic_created = True
                bell_dsn = runtime_dsn(stack.admin_dsn, bell_plan.runtime_role, bell_password)
                issuer = identity.instance.issuer
                bell = BellServer(stack, bell_plan.schema, bell_dsn, topic, work_dir, issuer)
                bell.launch()
                await bell.wait_healthy()
                loaded = load_audit_push_config(
                    enabled=True, bell_url=bell.url, key_file=bell.relay_key_file, key_id=KEY_ID
                )
                assert loaded is not None
                config: AuditPushConfig = (
                    loaded  # the production limits: 100 items, 30 s lease, 10 s deadline
                )
                pool = await asyncpg.create_pool(
                    runtime_dsn(stack.admin_dsn, sense_plan.runtime_role, sense_password),
                    min_size=2,
                    max_size=6,
                )
                assert pool is not None
                devices = await add_devices(admin, sense_plan.schema)
                for workers in WORKER_COUNTS:
                    await add_facts(admin, sense_plan.schema, devices, fact_count)
                    facts = await pending_facts(admin, sense_plan.schema)
                    if workers == WORKER_COUNTS[0]:
                        results["raw_insert_rows_per_s"] = await baseline(
                            admin, bell_plan.schema, facts, counts
                        )
                    rate, whole = await relay_run(
                        pool, admin, sense_plan.schema, bell_plan.schema, config, workers, facts, counts
                    )
                    results[f"relay_{workers}w_events_per_s"] = rate
                    results[f"relay_{workers}w_ratio"] = rate / results["raw_insert_rows_per_s"]
                    results[f"relay_{workers}w_whole"] = whole
                device = uuid.uuid4()
                seconds, results["latency_whole"] = await latency(config, batches, device, counts)
                token = await hydra.machine_token(
                    issuer,
                    "bench",
                    identity.client_secrets["bench"],
                    scopes=[AUDIT_READ_PERMISSION],
                    audiences=[BELL_AUDIENCE],
                )
                await newest_fact_read_with_a_bench_token(bell.url, token, device)
                results["latency_batches"] = batches
                results["latency_ms"] = {
                    name: percentile(seconds, fraction) * 1000
                    for name, fraction in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
                }
                results["latency_ms"]["mean"] = statistics.fmean(seconds) * 1000
                handled = await handler_seconds(bell_dsn, bell_plan.schema, batches)
                results["handler_ms"] = {
                    name: percentile(handled, fraction) * 1000
                    for name, fraction in (("p50", 0.50), ("p99", 0.99))
                }
    finally:
        if pool is not None:
            await pool.close()
        if bell is not None:
            bell.stop()
        if topic_created:
            with contextlib.suppress(Exception):
                await kafka_topic(stack.kafka_bootstrap, topic, create=False)
        await drop(admin, bell_plan)
        await drop(admin, sense_plan)
        await admin.close()
    return results


def report(results: dict[str, Any], counts: BenchCounts) -> None:
    raw = results["raw_insert_rows_per_s"]
    print(f"Sense outbox -> Bell stored: {results['facts']} facts per run, {results['devices']} devices")
    print(f"{'run':<44} {'events/s':>10} {'vs raw':>8}")
    print(f"{'raw 100-row INSERT ... unnest (same rows)':<44} {raw:>10.0f} {1.0:>8.2f}")
    for workers in WORKER_COUNTS:
        rate = results[f"relay_{workers}w_events_per_s"]
        whole = results[f"relay_{workers}w_whole"]
        label = f"relay, {workers} worker(s), real Bell process"
        print(f"{label:<44} {BenchCounts.mark(whole, f'{rate:>10.0f} {rate / raw:>8.2f}')}")
    for workers in WORKER_COUNTS:
        rate = results[f"relay_{workers}w_events_per_s"]
        met = (
            results[f"relay_{workers}w_whole"] and rate / raw >= GOAL_RATIO and rate >= GOAL_EVENTS_PER_SECOND
        )
        print(
            f"goal: relay x{workers} ratio >= {GOAL_RATIO} and >= {GOAL_EVENTS_PER_SECOND} events/s: "
            f"{'met' if met else 'NOT met'}"
        )
    ms = results["latency_ms"]
    figures = f"p50 {ms['p50']:.1f} ms  p95 {ms['p95']:.1f} ms  p99 {ms['p99']:.1f} ms"
    print(
        f"Bell, signed {results['batch_items']}-item batch, {results['latency_batches']} sequential: "
        f"{BenchCounts.mark(results['latency_whole'], figures)}"
    )
    met = results["latency_whole"] and ms["p99"] <= GOAL_P99_MS
    print(f"goal: batch p99 <= {GOAL_P99_MS:.0f} ms: {'met' if met else 'NOT met'}")
    handled = results["handler_ms"]
    print(
        f"Bell's use case alone (AuditBatchReceiver.receive, in process, no HTTP), same batches: "
        f"p50 {handled['p50']:.1f} ms  p99 {handled['p99']:.1f} ms"
    )
    print(
        "BENCH_JSON "
        + json.dumps({"bench": "sense_audit_push", **results, "wrong_counts": counts.short}, sort_keys=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--facts", type=int, default=20_000, help="outbox facts per relay run")
    parser.add_argument("--batches", type=int, default=200, help="100-item batches for the latency run")
    parser.add_argument("--stack-dir", type=Path, default=REPO_ROOT / ".local", help="the stack's .local")
    args = parser.parse_args()
    counts = BenchCounts()
    report(run_cleanly(bench(LocalStack.load(args.stack_dir), args.facts, args.batches, counts)), counts)
    counts.exit_if_short("audit_push_bench")


if __name__ == "__main__":
    main()
