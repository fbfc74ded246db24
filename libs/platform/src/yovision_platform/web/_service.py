"""The process shell every service shares: CLI, health endpoints, metrics, workers, clean shutdown.

    <service> serve          start the HTTP API, the outbox relay and the service's workers
    <service> migrate        apply the schema migrations with the owner DSN (idempotent)
    <service> check-config   validate settings and secret files, print nothing secret
    <service> <command>      a service's own operator commands (`ServiceSpec.commands`, e.g. rotate-keys)

A service supplies a `ServiceSpec` (name, schema, settings class, migrations folder) and an optional
`configure` hook that adds routes, readiness checks and workers to the `ServiceContext`. A service without a
database of its own (the console, a backend for frontend) supplies a `WebServiceSpec` instead: no pool, no
migrations, no outbox relay; its `configure` hook gets a `WebContext`, and `migrate` has nothing to do.
`serve` refuses to start on bad configuration, an outdated schema or an unsafe runtime role, and exits 0
after SIGTERM once the HTTP server, every worker and the database pool have stopped.

Health: `/healthz` is liveness only (200 while the process serves HTTP): a dependency outage does not fail
it, because restarting the process would not bring PostgreSQL or Kafka back. `/readyz` is readiness: 503
`not_ready` while the database check fails or a worker is down (crashed, waiting for its capped-backoff
restart), 200 again by itself once both recover. While PostgreSQL is unreachable every route answers 503
`database_unavailable` with `Retry-After` (yovision_platform.web).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import logging
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import unquote, urlsplit

import asyncpg
import uvicorn
from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry

from yovision_platform.backoff import backoff_seconds, wait_for_stop
from yovision_platform.errors import ConfigError, PlatformError
from yovision_platform.messaging._kafka import KafkaAccessRefused
from yovision_platform.messaging._processed_events import ProcessedEventsPruner
from yovision_platform.messaging._relay import (
    OutboxRelay,
    OutboxRelayConfig,
    OutboxRelayMetrics,
    executor_for,
)
from yovision_platform.messaging._txn_producer import confluent_publisher_factory
from yovision_platform.observability._logging import configure_logging
from yovision_platform.observability._metrics import build_info, create_registry, render_latest
from yovision_platform.observability._tracing import configure_tracing, instrument_app
from yovision_platform.settings import (
    BaseServiceSettings,
    BaseWebSettings,
    load_settings,
    renamed_settings_in_use,
)
from yovision_platform.storage._db import DbConnection, Identifier, create_pool, is_database_unavailable
from yovision_platform.storage._migrations import SchemaPlan, migrate, preflight
from yovision_platform.web import create_app
from yovision_platform.web._problems import BROKER_UNAVAILABLE_ERRORS

__all__ = [
    "ServiceCommand",
    "ServiceContext",
    "ServiceSpec",
    "WebContext",
    "WebServiceSpec",
    "checked_pool",
    "main",
    "migrations_dir_of",
    "schema_of",
]

log = logging.getLogger("yovision_platform.service")

SHUTDOWN_GRACE_SECONDS = 20.0
READINESS_CHECK_TIMEOUT_SECONDS = 2.0
WORKER_RESTART_BACKOFF_BASE_SECONDS = 1.0
WORKER_RESTART_BACKOFF_CAP_SECONDS = 30.0
EXIT_CONFIG_ERROR = 2
EXIT_STARTUP_REFUSED = 3

Worker = Callable[[asyncio.Event], Awaitable[None]]
SettingsT = TypeVar("SettingsT", bound=BaseServiceSettings)
WebSettingsT = TypeVar("WebSettingsT", bound=BaseWebSettings)
ReadinessCheck = Callable[[], Awaitable[None]]


def _package_version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


@dataclass(frozen=True)
class ServiceCommand(Generic[SettingsT]):
    """An operator command of one service, run with the service's settings (exit code returned)."""

    help: str
    run: Callable[[ServiceSpec[SettingsT], SettingsT, argparse.Namespace], Coroutine[Any, Any, int]]
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None


@dataclass(frozen=True)
class ServiceSpec(Generic[SettingsT]):
    """A service with a schema of its own; `configure` receives a context typed by its settings class."""

    name: str
    schema: str
    settings_cls: type[SettingsT]
    migrations_dir: Path
    version: str = field(default_factory=lambda: _package_version("yovision-platform"))
    configure: Callable[[ServiceContext[SettingsT]], Awaitable[None]] | None = None
    commands: Mapping[str, ServiceCommand[SettingsT]] = field(default_factory=dict)

    @classmethod
    def for_package(
        cls,
        name: str,
        *,
        package: str,
        schema: str,
        settings_cls: type[SettingsT],
        configure: Callable[[ServiceContext[SettingsT]], Awaitable[None]] | None = None,
        commands: Mapping[str, ServiceCommand[SettingsT]] | None = None,
    ) -> ServiceSpec[SettingsT]:
        """The spec of an installed service: version from the distribution `name`, migrations from the
        `migrations` folder inside the import package `package`."""
        return cls(
            name=name,
            schema=schema,
            settings_cls=settings_cls,
            migrations_dir=migrations_dir_of(package),
            version=_package_version(name),
            configure=configure,
            commands=dict(commands or {}),
        )


def migrations_dir_of(package: str) -> Path:
    """The `migrations` folder shipped inside an import package (source tree or installed wheel)."""
    return Path(str(resources.files(package) / "migrations"))


@dataclass(frozen=True)
class WebServiceSpec(Generic[WebSettingsT]):
    """A service that keeps no database of its own: only HTTP routes, readiness checks and workers."""

    name: str
    settings_cls: type[WebSettingsT]
    version: str = field(default_factory=lambda: _package_version("yovision-platform"))
    configure: Callable[[WebContext[WebSettingsT]], Awaitable[None]] | None = None


@dataclass(kw_only=True)
class WebContext(Generic[WebSettingsT]):
    """What a `configure` hook builds on, typed by the service's settings class. Workers run until the
    `stop` event they receive."""

    spec: ServiceSpec[Any] | WebServiceSpec[Any]
    settings: WebSettingsT
    registry: CollectorRegistry
    app: FastAPI
    workers: dict[str, Worker] = field(default_factory=dict)
    readiness: dict[str, ReadinessCheck] = field(default_factory=dict)
    worker_alive: dict[str, bool] = field(default_factory=dict)

    def add_worker(self, name: str, worker: Worker) -> None:
        self.workers[name] = worker

    def add_readiness_check(self, name: str, check: ReadinessCheck) -> None:
        self.readiness[name] = check


@dataclass(kw_only=True)
class ServiceContext(WebContext[SettingsT]):
    """A `WebContext` with the service's schema and its runtime pool."""

    spec: ServiceSpec[SettingsT]
    settings: SettingsT
    plan: SchemaPlan
    pool: asyncpg.Pool

    def add_processed_events_pruner(self, *, consumer_group: str, topics: Sequence[str]) -> None:
        """Prune the processed_events rows of a consumer group this service runs (its retention setting,
        checked against the topics' before each round)."""
        settings = self.settings
        pruner = ProcessedEventsPruner(
            self.pool,
            self.plan.schema,
            consumer_group=consumer_group,
            kafka=settings.kafka,
            topics=topics,
            client_id=f"{self.spec.name}-{settings.instance_id}-pruner",
            retention_seconds=settings.processed_events_retention_days * 86_400,
        )
        self.add_worker(f"processed-events-pruner:{consumer_group}", pruner.run)


def runtime_role_of(dsn: str) -> tuple[str, str | None]:
    parts = urlsplit(dsn)
    if not parts.username:
        raise ConfigError("database_dsn_file", "dsn_missing_user", "the runtime DSN must name its role")
    return unquote(parts.username), unquote(parts.password) if parts.password else None


def schema_of(spec: ServiceSpec[Any], settings: BaseServiceSettings) -> str:
    """The schema this process works in: ``<P>_DATABASE_SCHEMA``, else the service's own (``sense``...)."""
    return settings.database_schema or spec.schema


def _plan(spec: ServiceSpec[Any], settings: BaseServiceSettings) -> SchemaPlan:
    role, _ = runtime_role_of(settings.database_dsn.get_secret_value())
    return SchemaPlan.for_service(
        schema_of(spec, settings), spec.migrations_dir, runtime_role=Identifier(role)
    )


def _add_health_routes(ctx: WebContext[Any]) -> None:
    @ctx.app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        # The instance id tells a caller (an operator, a test that picked a free port) which process answered.
        return {"status": "ok", "service": ctx.spec.name, "instance_id": ctx.settings.instance_id}

    @ctx.app.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        checks: dict[str, str] = {}
        for name, check in ctx.readiness.items():
            try:
                await asyncio.wait_for(check(), READINESS_CHECK_TIMEOUT_SECONDS)
                checks[name] = "ok"
            except Exception as exc:
                checks[name] = exc.code if isinstance(exc, PlatformError) else "failed"
        for name, alive in ctx.worker_alive.items():
            checks[f"worker:{name}"] = "ok" if alive else "down"
        ready = all(state == "ok" for state in checks.values())
        return JSONResponse(
            {"status": "ready" if ready else "not_ready", "checks": checks}, status_code=200 if ready else 503
        )

    @ctx.app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        if not ctx.settings.metrics_enabled:
            return Response(status_code=404)
        body, content_type = render_latest(ctx.registry)
        return Response(content=body, media_type=content_type)


async def _database_ready(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await conn.fetchval("SELECT 1")


def _add_outbox_relay(ctx: ServiceContext[Any]) -> None:
    settings = ctx.settings
    config = OutboxRelayConfig()
    metrics = OutboxRelayMetrics(ctx.registry)

    async def relay(stop: asyncio.Event) -> None:
        with executor_for(config) as executor:
            publishers = confluent_publisher_factory(
                settings.kafka,
                client_id=f"{ctx.spec.name}-{settings.instance_id}",
                executor=executor,
            )
            outbox_relay = OutboxRelay(
                ctx.pool,
                ctx.plan.schema,
                publishers,
                owner=settings.instance_id,
                config=config,
                metrics=metrics,
                names=settings.kafka_names,
            )
            await outbox_relay.run(stop)

    ctx.add_worker("outbox-relay", relay)


async def _supervise(ctx: WebContext[Any], name: str, worker: Worker, stop: asyncio.Event) -> None:
    """Run `worker` until `stop`. A crash is logged, marks the worker down and restarts it after a backoff."""
    failures = 0
    while not stop.is_set():
        ctx.worker_alive[name] = True
        started = time.monotonic()
        try:
            await worker(stop)
            return
        except Exception as exc:
            ctx.worker_alive[name] = False
            failures = 1 if time.monotonic() - started > WORKER_RESTART_BACKOFF_CAP_SECONDS else failures + 1
            if is_database_unavailable(exc) or isinstance(exc, BROKER_UNAVAILABLE_ERRORS):
                # An outage, not a bug: no traceback, and the repeat filter folds the restarts it causes.
                log.warning(
                    "worker stopped: dependency unavailable; restarting",
                    extra={"worker": name, "error_code": type(exc).__name__},
                )
            elif isinstance(exc, KafkaAccessRefused):
                # A configuration fault (credentials, trust): the stable code says which; no traceback.
                log.error(
                    "worker stopped: Kafka refused the client; restarting",
                    extra={"worker": name, "error_code": exc.code},
                )
            else:
                log.error(
                    "worker crashed; restarting",
                    extra={"worker": name, "error_code": type(exc).__name__},
                    exc_info=True,
                )
            await wait_for_stop(
                stop,
                backoff_seconds(
                    failures,
                    base_seconds=WORKER_RESTART_BACKOFF_BASE_SECONDS,
                    cap_seconds=WORKER_RESTART_BACKOFF_CAP_SECONDS,
                ),
            )


class _Server(uvicorn.Server):
    """uvicorn re-raises a captured SIGTERM after serving, which would kill the process before the workers
    and the pool are shut down; the shell owns the signals instead and asks the server to exit.

    uvicorn's own main loop wakes ten times a second to look for that request. This one does its per-second
    work (the `date` header) once a second and wakes at once when asked to exit: an idle service's event
    loop wakes about as often as its own workers need (docs/decisions.md, "Suite time: what an idle service
    costs")."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._exit_requested = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def request_exit(self) -> None:
        self.should_exit = True
        self._exit_requested.set()

    async def main_loop(self) -> None:
        while not await self.on_tick(0):  # tick 0: on_tick's once-a-second work, every time
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._exit_requested.wait()


@contextlib.asynccontextmanager
async def checked_pool(
    spec: ServiceSpec[Any], settings: BaseServiceSettings, *, application: str | None = None
) -> AsyncIterator[tuple[asyncpg.Pool, SchemaPlan]]:
    """The runtime pool, after the same preflight `serve` runs (current schema, safe runtime role); for
    `serve` and for a service's operator CLIs. Closed on exit."""
    plan = _plan(spec, settings)
    pool = await create_pool(
        settings.database_dsn.get_secret_value(),
        application_name=f"{application or spec.name}:{settings.instance_id}",
    )
    try:
        async with pool.acquire() as conn:
            await preflight(conn, plan)
        yield pool, plan
    finally:
        await pool.close()


async def _run(ctx: WebContext[Any]) -> int:
    """Serve `ctx.app` and run the workers until SIGTERM/SIGINT; then stop the workers."""
    settings = ctx.settings
    stop = asyncio.Event()
    tasks = [asyncio.create_task(_supervise(ctx, n, w, stop), name=n) for n, w in ctx.workers.items()]
    server = _Server(
        uvicorn.Config(
            ctx.app,
            host=settings.http_host,
            port=settings.http_port,
            ssl_certfile=settings.http_tls_cert_file,
            ssl_keyfile=settings.http_tls_key_file,
            log_config=None,
            access_log=False,
            lifespan="off",
        )
    )
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, server.request_exit)
    log.info("service starting", extra={"port": settings.http_port, "workers": sorted(ctx.workers)})
    await server.serve()
    stop.set()
    _, pending = await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE_SECONDS) if tasks else (set(), set())
    for task in pending:
        task.cancel()
    log.info("service stopped", extra={"unfinished_workers": len(pending)})
    return 0 if server.started else EXIT_STARTUP_REFUSED


@contextlib.asynccontextmanager
async def _traced(
    spec: ServiceSpec[Any] | WebServiceSpec[Any], settings: BaseWebSettings
) -> AsyncIterator[FastAPI]:
    """The service's app, its requests traced when ``<P>_TRACING_OTLP_ENDPOINT`` is set; on exit, the spans
    still queued are exported (within the exporter's timeout)."""
    tracing = configure_tracing(
        spec.name,
        instance_id=settings.instance_id,
        version=spec.version,
        otlp_endpoint=settings.tracing_otlp_endpoint,
        sampling_ratio=settings.tracing_sampling_ratio,
    )
    app = create_app(spec.name, spec.version)
    if tracing.provider is not None:
        instrument_app(app, tracing.provider)
    try:
        yield app
    finally:
        await asyncio.to_thread(tracing.shutdown)


async def _serve(spec: ServiceSpec[SettingsT], settings: SettingsT) -> int:
    async with checked_pool(spec, settings) as (pool, plan), _traced(spec, settings) as app:
        registry = create_registry()
        build_info(registry, service=spec.name, version=spec.version, instance_id=settings.instance_id)
        ctx = ServiceContext(spec=spec, settings=settings, plan=plan, pool=pool, registry=registry, app=app)
        ctx.add_readiness_check("database", lambda: _database_ready(pool))
        _add_health_routes(ctx)
        if settings.outbox_relay_enabled:
            _add_outbox_relay(ctx)
        if spec.configure is not None:
            await spec.configure(ctx)
        return await _run(ctx)


async def _serve_web(spec: WebServiceSpec[WebSettingsT], settings: WebSettingsT) -> int:
    async with _traced(spec, settings) as app:
        registry = create_registry()
        build_info(registry, service=spec.name, version=spec.version, instance_id=settings.instance_id)
        ctx = WebContext(spec=spec, settings=settings, registry=registry, app=app)
        _add_health_routes(ctx)
        if spec.configure is not None:
            await spec.configure(ctx)
        return await _run(ctx)


async def _migrate(spec: ServiceSpec[Any], settings: BaseServiceSettings) -> int:
    _, password = runtime_role_of(settings.database_dsn.get_secret_value())
    plan = _plan(spec, settings)
    admin: DbConnection = await asyncpg.connect(settings.read_migration_dsn().get_secret_value())
    try:
        applied = await migrate(admin, plan, runtime_password=password)
    finally:
        await admin.close()
    print(
        json.dumps(
            {
                "service": spec.name,
                "schema": plan.schema,
                "applied": [f"{m.track}/{m.version:04d}_{m.name}" for m in applied],
            }
        )
    )
    return 0


def _parser(spec: ServiceSpec[Any] | WebServiceSpec[Any]) -> argparse.ArgumentParser:
    what = f"{spec.schema} schema" if isinstance(spec, ServiceSpec) else "no database"
    parser = argparse.ArgumentParser(prog=spec.name, description=f"{spec.name} ({what})")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the HTTP API, the outbox relay and the workers until SIGTERM")
    commands.add_parser("migrate", help="apply pending schema migrations using the migration DSN file")
    commands.add_parser("check-config", help="validate settings and secret files; prints no secret")
    for name, command in (spec.commands if isinstance(spec, ServiceSpec) else {}).items():
        sub = commands.add_parser(name, help=command.help)
        if command.add_arguments is not None:
            command.add_arguments(sub)
    return parser


def main(spec: ServiceSpec[Any] | WebServiceSpec[Any], argv: Sequence[str] | None = None) -> int:
    args = _parser(spec).parse_args(argv)
    try:
        settings = load_settings(spec.settings_cls)
    except ConfigError as exc:
        print(f"{spec.name}: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    configure_logging(spec.name, settings.instance_id, settings.log_level)
    for former in renamed_settings_in_use(spec.settings_cls):
        log.warning(
            "setting read by its former name",
            extra={"setting": spec.settings_cls.renamed_settings[former], "former_name": former},
        )
    try:
        if args.command == "check-config":
            print(json.dumps({"service": spec.name, "config": "ok", "instance_id": settings.instance_id}))
            return 0
        if isinstance(spec, WebServiceSpec):
            if args.command == "migrate":  # nothing to migrate: `services.sh up` runs it for every service
                print(json.dumps({"service": spec.name, "schema": None, "applied": []}))
                return 0
            return asyncio.run(_serve_web(spec, settings))
        assert isinstance(settings, BaseServiceSettings)
        if args.command == "migrate":
            return asyncio.run(_migrate(spec, settings))
        if args.command in spec.commands:
            return asyncio.run(spec.commands[args.command].run(spec, settings, args))
        return asyncio.run(_serve(spec, settings))
    except ConfigError as exc:
        print(f"{spec.name}: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except PlatformError as exc:
        log.error("start-up refused", extra={"error_code": exc.code})
        print(f"{spec.name}: start-up refused: {exc}", file=sys.stderr)
        return EXIT_STARTUP_REFUSED
    except asyncpg.PostgresError as exc:
        # Only the SQLSTATE: server messages may carry role or object names.
        log.error("start-up refused: database error", extra={"error_code": exc.sqlstate})
        print(f"{spec.name}: start-up refused: database_error (SQLSTATE {exc.sqlstate})", file=sys.stderr)
        return EXIT_STARTUP_REFUSED
    except (OSError, asyncpg.InterfaceError) as exc:
        # Only the exception class: driver messages may carry host or role names.
        log.error("start-up refused: database unavailable", extra={"error_code": type(exc).__name__})
        print(f"{spec.name}: start-up refused: database_unavailable ({type(exc).__name__})", file=sys.stderr)
        return EXIT_STARTUP_REFUSED
