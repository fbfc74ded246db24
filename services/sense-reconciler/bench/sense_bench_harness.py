"""What the convergence benchmark runs: Sense as `serve` wires it (Control API in process over ASGI, the
outbox relay to Kafka, the device consumer that wakes the reconciler, one writer per MediaMTX server) on a
fresh schema, fresh Kafka topics under a unique prefix and private MediaMTX processes; and the raw baseline.

The Control API takes real access tokens: a private ORY Hydra (`tools.hydra.private_hydra`, the
environment's clients) issues the `bench` machine client's `client_credentials` tokens (`sense:operate
sense:read`, audience sense-reconciler), and the API verifies them against that Hydra's JWKS, as `serve`
does against `SENSE_AUTH_ISSUER`'s.

Everything it creates is removed on exit (schema and roles, topics; the MediaMTX processes are stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from prometheus_client import CollectorRegistry

from sense_reconciler.adapters.mediamtx import MediaMtxClient
from sense_reconciler.adapters.unit_of_work import postgres_units
from sense_reconciler.domain.reconcile import PathConfig
from sense_reconciler.entrypoints.api import install
from sense_reconciler.entrypoints.device_consumer import DeviceEventConsumer
from sense_reconciler.entrypoints.main import SPEC
from sense_reconciler.service_layer.devices import DeviceService
from sense_reconciler.service_layer.metrics import ReconcileMetrics
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.reconciler import Reconciler
from sense_reconciler.service_layer.source_uris import SourceUris
from sense_reconciler.settings import AUDIENCE
from yovision_platform.access_tokens import AccessTokenVerifier, use_access_token_verifier
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.db import Identifier
from yovision_platform.encryption import EncryptionKeyRing
from yovision_platform.events import default_catalog
from yovision_platform.jwks import IssuerKeys
from yovision_platform.localstack import LocalStack, runtime_dsn
from yovision_platform.media_servers import MediaFleet
from yovision_platform.migrations import SchemaPlan, drop, migrate
from yovision_platform.naming import KafkaNames
from yovision_platform.outbox_publisher import OutboxPublisher, OutboxPublisherConfig, executor_for
from yovision_platform.permissions import AUDIENCES
from yovision_platform.tools import hydra, identity_provider
from yovision_platform.tools.mediamtx_sandbox import MediaMtxSandbox
from yovision_platform.txn_producer import confluent_publisher_factory
from yovision_platform.web import create_app

__all__ = [
    "BENCH_CLIENT",
    "Burst",
    "Changes",
    "SenseUnderTest",
    "identity_provider_for_bench",
    "raw_replaces",
    "raw_sequential_adds",
]

BENCH_CLIENT = "bench"  # the environment's machine client of the benchmarks: the actor of every change
BENCH_PERMISSIONS = ("sense:operate", "sense:read")
ALGORITHMS = frozenset({"RS256", "ES256"})  # SENSE_AUTH_ALGORITHMS' default
# A fresh machine token well before Hydra's expire (15 minutes): a run takes longer than one lives.
TOKEN_RENEW_SECONDS = 600.0
DEVICES_PER_SITE = 16  # the default per-site limit of enabled devices
SENSE_TOPICS = ("sense.device.v1", "sense.path-ownership.v1", "sense.audit.v1")
CONVERGED_POLL_SECONDS = 0.1
CONVERGE_TIMEOUT_SECONDS = 600.0
CREATE_CONCURRENCY = 8  # API clients creating the burst at once
RAW_CALL_TIMEOUT_SECONDS = 60.0


def identity_provider_for_bench(
    stack: LocalStack, work_dir: Path
) -> contextlib.AbstractAsyncContextManager[hydra.PrivateHydra]:
    """A private Hydra with the environment's clients (`bench` among them), removed on exit."""
    clients = identity_provider.clients(hydra.UNSERVED_CONSOLE_URL, AUDIENCES)
    return hydra.private_hydra(stack.admin_dsn, work_dir / "hydra", clients)


class BenchToken(httpx.Auth):
    """Sends the `bench` client's access token for Sense, fetched by `client_credentials` and fetched again
    every TOKEN_RENEW_SECONDS (one fetch at a time, however many requests are in flight)."""

    def __init__(self, identity: hydra.PrivateHydra) -> None:
        self._identity = identity
        self._lock = asyncio.Lock()
        self._token: str | None = None
        self._renew_at = 0.0

    async def token(self) -> str:
        async with self._lock:
            if self._token is None or time.monotonic() >= self._renew_at:
                self._token = await hydra.machine_token(
                    self._identity.instance.issuer,
                    BENCH_CLIENT,
                    self._identity.client_secrets[BENCH_CLIENT],
                    scopes=BENCH_PERMISSIONS,
                    audiences=[AUDIENCE],
                )
                self._renew_at = time.monotonic() + TOKEN_RENEW_SECONDS
            return self._token

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        request.headers["Authorization"] = f"Bearer {await self.token()}"
        yield request


def _raw_client(sandbox: MediaMtxSandbox) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=sandbox.url, timeout=RAW_CALL_TIMEOUT_SECONDS, auth=sandbox.auth())


async def raw_sequential_adds(sandbox: MediaMtxSandbox, count: int) -> float:
    """The baseline: `count` plain sequential path adds to an empty MediaMTX; returns adds per second.
    MediaMTX re-applies its whole configuration on every add, so one costs more the more paths exist."""
    async with _raw_client(sandbox) as http:
        started = time.monotonic()
        for n in range(count):
            body = {"source": f"rtsp://127.0.0.1:1/raw/{n}", "sourceOnDemand": True}
            (await http.post(f"/v3/config/paths/add/raw/{n:04d}", json=body)).raise_for_status()
        return count / (time.monotonic() - started)


async def raw_replaces(sandbox: MediaMtxSandbox, count: int, *, gap_seconds: float) -> list[float]:
    """MediaMTX's own time for one path replace with the paths of `raw_sequential_adds` present: the floor
    under a single change's latency (seconds, sorted)."""
    latencies = []
    async with _raw_client(sandbox) as http:
        for n in range(count):
            body = {"source": f"rtsp://127.0.0.1:2/raw/{n}", "sourceOnDemand": True}
            started = time.monotonic()
            (await http.post(f"/v3/config/paths/replace/raw/{n:04d}", json=body)).raise_for_status()
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(gap_seconds)
    return sorted(latencies)


class TimedClient(MediaMtxClient):
    """The shipped client; records when each add or replace of a path came back (instrumentation only)."""

    def __init__(self, sandbox: MediaMtxSandbox, applied: dict[str, asyncio.Event]) -> None:
        super().__init__(sandbox.url, deadline_seconds=20.0, credentials=sandbox.credentials)
        self.applied = applied
        self.applied_at: dict[str, float] = {}
        self.replace_started_at: dict[str, float] = {}
        self.busy_seconds = 0.0  # with a request of ours in flight to this MediaMTX

    async def _call(self, method: str, url: str, *, allow_404: bool = False, **kwargs: Any) -> httpx.Response:
        started = time.monotonic()
        try:
            return await super()._call(method, url, allow_404=allow_404, **kwargs)
        finally:
            self.busy_seconds += time.monotonic() - started

    async def add_path(self, name: str, config: PathConfig) -> None:
        await super().add_path(name, config)
        self._done(name)

    async def replace_path(self, name: str, config: PathConfig) -> None:
        self.replace_started_at[name] = time.monotonic()
        await super().replace_path(name, config)
        self._done(name)

    def _done(self, name: str) -> None:
        self.applied_at[name] = time.monotonic()
        if (event := self.applied.get(name)) is not None:
            event.set()


@dataclass
class Burst:
    devices: int
    servers: int
    wall_seconds: float
    latencies_seconds: list[float]
    failed_items: int
    retried_devices: int
    created_seconds: float  # until the API had answered every create
    busy_seconds: list[float]  # per server: time with one of our requests in flight

    @property
    def rate(self) -> float:
        return self.devices / self.wall_seconds


@dataclass
class Changes:
    """Single changes, seconds each: from the API call until MediaMTX answered the replace, and the part
    of it MediaMTX took to answer (the rest: API, outbox relay, Kafka, consumer, claim, decrypt)."""

    totals: list[float]
    mediamtx: list[float]


@dataclass
class SenseUnderTest:
    stack: LocalStack
    schema: Identifier
    pool: asyncpg.Pool
    api: httpx.AsyncClient
    service: DeviceService
    fleet: MediaFleet[TimedClient]
    registry: CollectorRegistry
    applied: dict[str, asyncio.Event]

    async def create_sites(self, devices: int) -> list[str]:
        """One site per 16 devices, assigned round-robin to the servers; returns the site of each device."""
        servers = self.fleet.ids
        sites = [f"site-{n // DEVICES_PER_SITE}" for n in range(devices)]
        for index, site in enumerate(sorted(set(sites), key=lambda s: int(s.split("-")[1]))):
            response = await self.api.put(
                f"/v1/sites/bench/{site}", json={"media_server_id": servers[index % len(servers)]}
            )
            response.raise_for_status()
        return sites

    async def burst(self, devices: int) -> Burst:
        """Create `devices` enabled devices through the API, as fast as it answers (CREATE_CONCURRENCY
        clients), and wait until every one is converged; latency = DB clock from creation to the
        completion of its reconcile."""
        sites = await self.create_sites(devices)
        for _, client in self.fleet.items():
            client.busy_seconds = 0.0
        clients = asyncio.Semaphore(CREATE_CONCURRENCY)

        async def create(n: int, site: str) -> None:
            body = {
                "tenant_id": "bench",
                "site_id": site,
                "name": f"cam {n}",
                "path_name": f"bench/{site}/cam-{n:04d}",
                "source_uri": f"rtsp://bench:pw@127.0.0.1:1/{n}",
                "desired_state": "enabled",
            }
            async with clients:
                (await self.api.post("/v1/devices", json=body)).raise_for_status()

        started = time.monotonic()
        await asyncio.gather(*(create(n, site) for n, site in enumerate(sites)))
        created = time.monotonic() - started
        await self.wait_converged()
        wall = time.monotonic() - started
        s = self.schema.quoted
        rows = await self.pool.fetch(
            f"SELECT extract(epoch FROM r.last_result_at - d.created_at) AS seconds "
            f"FROM {s}.reconcile_state r JOIN {s}.devices d ON d.id = r.device_id"
        )
        retried = await self.pool.fetchval(
            f"SELECT count(*) FROM {s}.reconcile_state WHERE attempts > 0 OR last_error_code IS NOT NULL"
        )
        failed = sum(
            self.registry.get_sample_value(
                "sense_reconcile_items_total", {"result": "failed", "media_server": server}
            )
            or 0
            for server in self.fleet.ids
        )
        return Burst(
            devices=devices,
            servers=len(self.fleet.ids),
            wall_seconds=wall,
            latencies_seconds=sorted(float(r["seconds"]) for r in rows),
            failed_items=int(failed),
            retried_devices=int(retried),
            created_seconds=created,
            busy_seconds=[client.busy_seconds for _, client in self.fleet.items()],
        )

    async def audit_facts_by(self, actor: str) -> int:
        """Device-audit facts whose actor is `actor` (the facts the push sends Bell)."""
        query = f"SELECT count(*) FROM {self.schema.quoted}.device_operation_outbox WHERE actor = $1"
        return int(await self.pool.fetchval(query, actor))

    async def wait_converged(self) -> None:
        """Until every device is converged; RuntimeError after CONVERGE_TIMEOUT_SECONDS (a benchmark that
        waits for ever reports nothing)."""
        query = f"SELECT count(*) FROM {self.schema.quoted}.reconcile_state WHERE status <> 'converged'"
        deadline = time.monotonic() + CONVERGE_TIMEOUT_SECONDS
        while left := await self.pool.fetchval(query):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{left} devices not converged within {CONVERGE_TIMEOUT_SECONDS:.0f} s")
            await asyncio.sleep(CONVERGED_POLL_SECONDS)

    async def single_changes(self, count: int, *, gap_seconds: float, timeout_seconds: float) -> Changes:
        """`count` sequential changes of one device's URI each (converged fleet); seconds from the API call
        until MediaMTX answered the replace (wake-up through Kafka: relay, topic, consumer)."""
        rows = await self.pool.fetch(
            f"SELECT id, path_name FROM {self.schema.quoted}.devices ORDER BY path_name LIMIT $1", count
        )
        totals, mediamtx = [], []
        for n, row in enumerate(rows):
            event = self.applied[row["path_name"]] = asyncio.Event()
            started = time.monotonic()
            response = await self.api.patch(
                f"/v1/devices/{row['id']}", json={"source_uri": f"rtsp://bench:pw@127.0.0.1:2/{n}"}
            )
            response.raise_for_status()
            await asyncio.wait_for(event.wait(), timeout_seconds)
            name = row["path_name"]
            client = max((c for _, c in self.fleet.items()), key=lambda c: c.applied_at.get(name, 0.0))
            totals.append(client.applied_at[name] - started)
            mediamtx.append(client.applied_at[name] - client.replace_started_at[name])
            await asyncio.sleep(gap_seconds)
        return Changes(sorted(totals), sorted(mediamtx))


@contextlib.asynccontextmanager
async def sense_under_test(
    stack: LocalStack,
    admin: asyncpg.Connection,
    servers: Sequence[MediaMtxSandbox],
    label: str,
    identity: hydra.PrivateHydra,
) -> AsyncIterator[SenseUnderTest]:
    """Sense on a fresh schema and fresh topics (prefix `bench-<hex>.`) with `servers` as mtx-0, mtx-1...,
    its Control API taking `identity`'s access tokens."""
    tag = uuid.uuid4().hex[:8]
    schema = Identifier(f"bench_{tag}")
    names = KafkaNames(f"bench-{tag}.")
    print(f"{label}: schema {schema}, Kafka prefix {names.prefix}", flush=True)
    plan = SchemaPlan.for_service(schema, SPEC.migrations_dir)
    password = secrets.token_urlsafe(16)
    catalog = default_catalog()
    topics = {names.topic(t): catalog.topics[t].partitions for t in SENSE_TOPICS}
    async with contextlib.AsyncExitStack() as cleanup:
        cleanup.push_async_callback(drop, admin, plan)
        await migrate(admin, plan, runtime_password=password)
        cleanup.push_async_callback(_kafka_topics, stack.kafka_bootstrap, topics, False)
        await _kafka_topics(stack.kafka_bootstrap, topics, True)
        pool = await asyncpg.create_pool(
            runtime_dsn(stack.admin_dsn, plan.runtime_role, password), min_size=2, max_size=8
        )
        assert pool is not None
        cleanup.push_async_callback(pool.close)
        applied: dict[str, asyncio.Event] = {}
        fleet = MediaFleet({f"mtx-{n}": TimedClient(server, applied) for n, server in enumerate(servers)})
        cleanup.push_async_callback(fleet.aclose)
        serde = AvroSerde(SchemaRegistry.load())
        sources = SourceUris(EncryptionKeyRing({"bench": os.urandom(32)}, "bench"))
        units = postgres_units(pool, schema)
        service = DeviceService(
            units,
            serde,
            device_topic="sense.device.v1",
            partitions=catalog.topics["sense.device.v1"].partitions,
            sources=sources,
            media_servers=frozenset(fleet.ids),
            default_media_server=fleet.ids[0],
        )
        registry = CollectorRegistry()
        owned = OwnedPartitions(names.topic("sense.device.v1"))
        reconciler = Reconciler(
            units,
            fleet,
            owned,
            ReconcileMetrics(registry, fleet.ids),
            serde,
            owner="bench",
            sources=sources,
            batch=128,
            drift_check_seconds=0,
        )
        consumer = DeviceEventConsumer(
            pool,
            schema,
            serde,
            owned,
            kafka=stack.kafka_bootstrap,
            group_id=names.group("sense"),
            client_id="bench",
        )
        app = create_app("sense-reconciler-bench", "0")
        install(app, service)
        issuer = identity.instance.issuer
        jwks = await cleanup.enter_async_context(httpx.AsyncClient(follow_redirects=False))
        verifier = AccessTokenVerifier(
            IssuerKeys(f"{issuer}/.well-known/jwks.json", ALGORITHMS, jwks), issuer, AUDIENCE
        )
        cleanup.push_async_callback(verifier.keys.aclose)
        use_access_token_verifier(app, verifier)
        api = await cleanup.enter_async_context(
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://bench", auth=BenchToken(identity)
            )
        )
        stop = asyncio.Event()
        config = OutboxPublisherConfig()
        executor = cleanup.enter_context(executor_for(config))
        relay = OutboxPublisher(
            pool,
            schema,
            confluent_publisher_factory(stack.kafka_bootstrap, client_id="bench", executor=executor),
            owner="bench",
            config=config,
            names=names,
        )
        tasks = [asyncio.create_task(worker.run(stop)) for worker in (reconciler, consumer, relay)]
        cleanup.push_async_callback(_stop_all, stop, tasks)
        while len(owned.snapshot()) < catalog.topics["sense.device.v1"].partitions:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        yield SenseUnderTest(stack, schema, pool, api, service, fleet, registry, applied)


async def _stop_all(stop: asyncio.Event, tasks: list[asyncio.Task[Any]]) -> None:
    stop.set()
    for task in tasks:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 30)


async def _kafka_topics(bootstrap: str, topics: dict[str, int], create: bool) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        if create:
            await admin.create_topics([NewTopic(name, count, 1) for name, count in topics.items()])
        else:
            await admin.delete_topics(list(topics))
    finally:
        await admin.close()


def mediamtx_binary(repo_root: Path) -> Path:
    return repo_root / ".local" / "bin" / "mediamtx"
