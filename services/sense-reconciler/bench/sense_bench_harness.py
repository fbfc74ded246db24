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
import sys
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from sense_reconciler.adapters.mediamtx import MediaMtxClient
from sense_reconciler.adapters.unit_of_work import postgres_units
from sense_reconciler.bootstrap import SenseUseCases
from sense_reconciler.domain.reconcile import PathConfig
from sense_reconciler.entrypoints.api import install
from sense_reconciler.entrypoints.device_consumer import DeviceEventConsumer
from sense_reconciler.entrypoints.main import SPEC
from sense_reconciler.entrypoints.reconciler_worker import ReconcilerWorker
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.metrics import ReconcileMetrics
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.reconciler import Reconciler
from sense_reconciler.service_layer.source_uris import SourceUris
from sense_reconciler.settings import AUDIENCE
from yovision_platform.localstack import LocalStack, runtime_dsn
from yovision_platform.mediamtx import MediaFleet
from yovision_platform.messaging import (
    AvroSerde,
    KafkaNames,
    OutboxRelay,
    OutboxRelayConfig,
    SchemaRegistry,
    confluent_publisher_factory,
    default_catalog,
    executor_for,
)
from yovision_platform.security import EncryptionKeyRing
from yovision_platform.storage import Identifier, SchemaPlan, drop, migrate
from yovision_platform.tools import hydra, identity_provider
from yovision_platform.tools.mediamtx_sandbox import MediaMtxSandbox
from yovision_platform.web import (
    AUDIENCES,
    AccessTokenVerifier,
    IssuerKeys,
    create_app,
    use_access_token_verifier,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the platform benchmarks' package (bench/)
from bench.infra import stack_topics  # topics replicated as the stack's

__all__ = [
    "BENCH_CLIENT",
    "Burst",
    "Change",
    "RawMediaMtx",
    "Round",
    "SenseUnderTest",
    "identity_provider_for_bench",
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


class RawMediaMtx:
    """The baseline: plain HTTP calls to a MediaMTX of its own, the same requests Sense makes, one at a time,
    nothing else around them. Close with `aclose`."""

    def __init__(self, sandbox: MediaMtxSandbox) -> None:
        self._http = httpx.AsyncClient(
            base_url=sandbox.url, timeout=RAW_CALL_TIMEOUT_SECONDS, auth=sandbox.auth()
        )

    async def adds(self, first: int, count: int) -> float:
        """Sequential adds of paths `first`..`first + count - 1`; returns the seconds they took. MediaMTX
        re-applies its whole configuration on every add, so one costs more the more paths exist."""
        started = time.monotonic()
        for n in range(first, first + count):
            body = {"source": f"rtsp://127.0.0.1:1/raw/{n}", "sourceOnDemand": True}
            (await self._http.post(f"/v3/config/paths/add/raw/{n:04d}", json=body)).raise_for_status()
        return time.monotonic() - started

    async def replace(self, n: int, version: int) -> float:
        """One replace of path `n` (added by `adds`) with a new source; returns the seconds it took."""
        body = {"source": f"rtsp://127.0.0.1:2/raw/{n}/{version}", "sourceOnDemand": True}
        started = time.monotonic()
        (await self._http.post(f"/v3/config/paths/replace/raw/{n:04d}", json=body)).raise_for_status()
        return time.monotonic() - started

    async def aclose(self) -> None:
        await self._http.aclose()


class TimedClient(MediaMtxClient):
    """The shipped client; records when each call on a path started and came back (instrumentation only)."""

    def __init__(self, sandbox: MediaMtxSandbox, applied: dict[str, asyncio.Event]) -> None:
        super().__init__(sandbox.url, deadline_seconds=20.0, credentials=sandbox.credentials)
        self.applied = applied
        self.applied_at: dict[str, float] = {}
        self.replace_started_at: dict[str, float] = {}
        self.read_at: dict[str, tuple[float, float]] = {}  # the last read of a path: started, answered
        self.busy_seconds = 0.0  # with a request of ours in flight to this MediaMTX

    async def _call(self, method: str, url: str, *, allow_404: bool = False, **kwargs: Any) -> httpx.Response:
        started = time.monotonic()
        try:
            return await super()._call(method, url, allow_404=allow_404, **kwargs)
        finally:
            self.busy_seconds += time.monotonic() - started

    async def get_path(self, name: str) -> PathConfig | None:
        started = time.monotonic()
        observed = await super().get_path(name)
        self.read_at[name] = (started, time.monotonic())
        return observed

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
class Round:
    """One round of a burst: `count` devices created through the API at once, seconds from the first create
    until MediaMTX answered the last of their adds."""

    count: int
    seconds: float
    created_seconds: float  # until the API had answered every create of the round
    busy_seconds: list[float]  # per server: time with one of our requests in flight

    @property
    def rate(self) -> float:
        return self.count / self.seconds


@dataclass
class Burst:
    devices: int
    servers: int
    rounds: list[Round]
    latencies_seconds: list[float]  # per device, API call -> converged (DB clock), sorted
    failed_items: int
    retried_devices: int

    @property
    def wall_seconds(self) -> float:
        return sum(r.seconds for r in self.rounds)

    @property
    def rate(self) -> float:
        return self.devices / self.wall_seconds

    @property
    def busy_seconds(self) -> list[float]:
        return [sum(column) for column in zip(*(r.busy_seconds for r in self.rounds), strict=True)]


@dataclass(frozen=True)
class Change:
    """One single change, seconds each: from the API call until MediaMTX answered the replace (`total`),
    split into the API call until it answered; its answer until Sense's first MediaMTX call for it began
    (the wake-up, claim, lease renewal with the device load, decryption); that call's start until the
    replace began (a read of the path first, when Sense makes one; else 0); and the replace."""

    total: float
    api: float
    to_first_call: float
    read: float
    replace: float


@dataclass
class SenseUnderTest:
    stack: LocalStack
    schema: Identifier
    pool: asyncpg.Pool
    api: httpx.AsyncClient
    service: Devices
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

    async def burst_round(self, sites: Sequence[str], first: int, count: int) -> Round:
        """Create devices `first`..`first + count - 1` (enabled, on `sites[n]`) through the API as fast as
        it answers (CREATE_CONCURRENCY clients); the round ends when MediaMTX answered the last of their
        adds. Then waits, outside the round's time, until every device is converged."""
        for _, client in self.fleet.items():
            client.busy_seconds = 0.0
        clients = asyncio.Semaphore(CREATE_CONCURRENCY)
        numbers = range(first, first + count)
        configured = {self.path_of(sites[n], n): asyncio.Event() for n in numbers}
        self.applied.update(configured)

        async def create(n: int) -> None:
            async with clients:
                (await self.api.post("/v1/devices", json=self.device_body(sites, n))).raise_for_status()

        started = time.monotonic()
        await asyncio.gather(*(create(n) for n in numbers))
        created = time.monotonic() - started
        await asyncio.wait_for(
            asyncio.gather(*(event.wait() for event in configured.values())), CONVERGE_TIMEOUT_SECONDS
        )
        seconds = max(self.applied_at(name) for name in configured) - started
        busy = [client.busy_seconds for _, client in self.fleet.items()]
        await self.wait_converged()
        return Round(count, seconds, created, busy)

    async def burst(
        self, devices: int, rounds: int, beside: Callable[[int, int], Awaitable[None]] | None = None
    ) -> Burst:
        """`devices` devices in `rounds` rounds (`burst_round`). `beside(first, count)`, when given, runs next
        to each round, before the even rounds and after the odd ones (the bench's raw baseline of the same
        paths, see converge_bench), so that a load that drifts during the run falls on both alike."""
        sites = await self.create_sites(devices)
        done: list[Round] = []
        for index, (first, count) in enumerate(round_ranges(devices, rounds)):
            if beside is not None and index % 2 == 0:
                await beside(first, count)
            done.append(await self.burst_round(sites, first, count))
            if beside is not None and index % 2 == 1:
                await beside(first, count)
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
            rounds=done,
            latencies_seconds=sorted(float(r["seconds"]) for r in rows),
            failed_items=int(failed),
            retried_devices=int(retried),
        )

    def device_body(self, sites: Sequence[str], n: int) -> dict[str, str]:
        """The `POST /v1/devices` body of device `n`: enabled, on `sites[n]`."""
        return {
            "tenant_id": "bench",
            "site_id": sites[n],
            "name": f"cam {n}",
            "path_name": self.path_of(sites[n], n),
            "source_uri": f"rtsp://bench:pw@127.0.0.1:1/{n}",
            "desired_state": "enabled",
        }

    @staticmethod
    def path_of(site: str, n: int) -> str:
        return f"bench/{site}/cam-{n:04d}"

    def applied_at(self, name: str) -> float:
        """When MediaMTX last answered an add or replace of `name` (any server)."""
        return max(client.applied_at.get(name, 0.0) for _, client in self.fleet.items())

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

    async def devices(self, count: int) -> list[tuple[uuid.UUID, str]]:
        """The first `count` devices by path name: (id, path name)."""
        rows = await self.pool.fetch(
            f"SELECT id, path_name FROM {self.schema.quoted}.devices ORDER BY path_name LIMIT $1", count
        )
        return [(row["id"], row["path_name"]) for row in rows]

    async def single_change(
        self, device_id: uuid.UUID, path: str, version: int, *, timeout_seconds: float
    ) -> Change:
        """Change one converged device's URI through the API; timed until MediaMTX answered the replace."""
        event = self.applied[path] = asyncio.Event()
        started = time.monotonic()
        response = await self.api.patch(
            f"/v1/devices/{device_id}", json={"source_uri": f"rtsp://bench:pw@127.0.0.1:2/{version}"}
        )
        answered = time.monotonic()
        response.raise_for_status()
        await asyncio.wait_for(event.wait(), timeout_seconds)
        client = max((c for _, c in self.fleet.items()), key=lambda c: c.applied_at.get(path, 0.0))
        replace_started, replaced = client.replace_started_at[path], client.applied_at[path]
        read_started = client.read_at.get(path, (0.0, 0.0))[0]
        first_call = read_started if read_started >= answered else replace_started
        return Change(
            total=replaced - started,
            api=answered - started,
            to_first_call=first_call - answered,
            read=replace_started - first_call,
            replace=replaced - replace_started,
        )


def round_ranges(devices: int, rounds: int) -> list[tuple[int, int]]:
    """`devices` split into `rounds` consecutive (first, count) ranges as even as can be."""
    bounds = [devices * k // rounds for k in range(rounds + 1)]
    return [(bounds[k], bounds[k + 1] - bounds[k]) for k in range(rounds) if bounds[k + 1] > bounds[k]]


@contextlib.asynccontextmanager
async def sense_under_test(
    stack: LocalStack,
    admin: asyncpg.Connection,
    servers: Sequence[MediaMtxSandbox],
    label: str,
    identity: hydra.PrivateHydra,
    on_app: Callable[[FastAPI], None] | None = None,
) -> AsyncIterator[SenseUnderTest]:
    """Sense on a fresh schema and fresh topics (prefix `bench-<hex>.`) with `servers` as mtx-0, mtx-1...,
    its Control API taking `identity`'s access tokens. `on_app` sees the app before its routes are installed
    (as `serve` instruments it for tracing)."""
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
        cleanup.push_async_callback(stack_topics, stack.kafka_bootstrap, topics, create=False)
        await stack_topics(stack.kafka_bootstrap, topics, create=True)
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
        owned = OwnedPartitions(names.topic("sense.device.v1"))
        service = Devices(
            units,
            serde,
            device_topic="sense.device.v1",
            partitions=catalog.topics["sense.device.v1"].partitions,
            sources=sources,
            media_servers=frozenset(fleet.ids),
            default_media_server=fleet.ids[0],
            wake_reconciler=owned.wake_for,
        )
        registry = CollectorRegistry()
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
        if on_app is not None:
            on_app(app)
        install(app, SenseUseCases(devices=service, sites=service.sites, reconciler=reconciler))
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
        config = OutboxRelayConfig()
        executor = cleanup.enter_context(executor_for(config))
        relay = OutboxRelay(
            pool,
            schema,
            confluent_publisher_factory(stack.kafka_bootstrap, client_id="bench", executor=executor),
            owner="bench",
            config=config,
            names=names,
        )
        loops = (ReconcilerWorker(reconciler).run, consumer.run, relay.run)
        tasks = [asyncio.create_task(loop(stop)) for loop in loops]
        cleanup.push_async_callback(_stop_all, stop, tasks)
        while len(owned.snapshot()) < catalog.topics["sense.device.v1"].partitions:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        yield SenseUnderTest(stack, schema, pool, api, service, fleet, registry, applied)


async def _stop_all(stop: asyncio.Event, tasks: list[asyncio.Task[Any]]) -> None:
    stop.set()
    for task in tasks:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 30)


def mediamtx_binary(repo_root: Path) -> Path:
    return repo_root / ".local" / "bin" / "mediamtx"
