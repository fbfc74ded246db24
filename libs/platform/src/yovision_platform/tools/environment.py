"""A whole, isolated environment of the services (the five and the console) on the shared local stack, for
end-to-end tests.

An environment is a folder laid out like ``.local`` (``stack.env``, ``env/``, ``secrets/``, ``run/``,
``logs/``, ``media/``) and a name. It is made and run by exactly the tools ``make up`` uses:

1. ``stack.env`` names the stack's PostgreSQL admin DSN file and Kafka broker, and the environment's own
   MediaMTX servers (private processes with an authenticated Control API: their path lists belong to this
   environment alone), registered under operator ids (``media_servers``, default one server ``default``);
2. ``infra/scripts/create_topics.py --prefix <name>.`` creates the catalogue's topics under the prefix;
3. ``yovision_platform.tools.devsecrets <dir> --name <name> --port ...`` writes the env files and secrets
   (schemas ``<name>_sense``..., Kafka prefix ``<name>.``, free HTTP ports);
4. ``infra/scripts/services.sh up`` (``YOVISION_ENV_DIR=<dir>``) starts the environment's own OpenID
   provider (ORY Hydra on free ports, its role ``<name>_hydra``, see
   ``yovision_platform.tools.identity_provider``), then migrates and starts every service with its real
   console script.

Every environment made here is a test environment (the local stack of ``make up`` is made by ``devsecrets``
alone): its signal-watcher is confined to the loopback networks (``TEST_SETTINGS``:
``SIGNAL_PROBE_ONLY_NETWORKS=TEST_PROBE_ONLY_NETWORKS``) and resolves probe names from the hosts file alone
(``SIGNAL_PROBE_RESOLVER=hosts_file``), whatever else the caller sets, so no probe of an end-to-end or fuzz
run can leave the machine, not even as a DNS query (``environment_definition`` refuses a caller's blank
confinement or another resolver).

On exit every service and the provider are stopped and the environment's schemas, roles and topics are
removed, so runs never see each other; the services' logs are kept in ``.local/e2e-runs/<name>/`` (the
newest five runs). The environment can kill a service with SIGKILL and start it again, as an operator or
a crash would, and change an operator setting in a service's env file (``set_setting``, effective at the
service's next start). Nothing here reaches into a service: the caller drives the services through their
public interfaces.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from yovision_platform.localstack import LocalStack, read_env_file
from yovision_platform.messaging import admin_client
from yovision_platform.storage import Identifier, SchemaPlan, drop
from yovision_platform.tools.devsecrets import (
    IDENTITY_PORTS,
    LOCAL_SERVICES,
    Environment,
    LocalService,
    instance_name,
)
from yovision_platform.tools.hydra import drop_database_role
from yovision_platform.tools.jaeger import PrivateJaeger, private_jaeger
from yovision_platform.tools.localhost import free_port
from yovision_platform.tools.mediamtx_sandbox import MediaMtxSandbox, mediamtx_sandbox

__all__ = [
    "PROBE_CONFINEMENT_SETTING",
    "PROBE_RESOLVER_SETTING",
    "TEST_PROBE_ONLY_NETWORKS",
    "TEST_PROBE_RESOLVER",
    "TEST_SETTINGS",
    "LocalEnvironment",
    "ServiceHandle",
    "environment_definition",
    "local_environment",
]

REPO_ROOT = Path(__file__).resolve().parents[5]
SERVICES_SCRIPT = REPO_ROOT / "infra" / "scripts" / "services.sh"
CREATE_TOPICS_SCRIPT = REPO_ROOT / "infra" / "scripts" / "create_topics.py"
SERVICES_UP_TIMEOUT_SECONDS = 240.0
SERVICES_DOWN_TIMEOUT_SECONDS = 90.0
KILL_WAIT_SECONDS = 10.0
# The networks every probe of a test may reach (signal-watcher's `SIGNAL_PROBE_ONLY_NETWORKS`): loopback
# only. The one source of it: the environments below, tests/e2e's settings and the in-process tests' guards.
PROBE_CONFINEMENT_SETTING = "SIGNAL_PROBE_ONLY_NETWORKS"
TEST_PROBE_ONLY_NETWORKS = "127.0.0.0/8,::1/128"
# ... and probes resolve names from the hosts file only: no DNS query for a name a fuzzer made up.
PROBE_RESOLVER_SETTING = "SIGNAL_PROBE_RESOLVER"
TEST_PROBE_RESOLVER = "hosts_file"
TEST_SETTINGS: Mapping[str, str] = {
    PROBE_CONFINEMENT_SETTING: TEST_PROBE_ONLY_NETWORKS,
    PROBE_RESOLVER_SETTING: TEST_PROBE_RESOLVER,
}


@dataclass(frozen=True)
class ServiceHandle:
    """One service of the environment: its name, env-var prefix, schema and HTTP base URL."""

    service: LocalService
    schema: str | None
    port: int

    @property
    def name(self) -> str:
        return self.service.name

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class LocalEnvironment:
    """A started environment (see the module docstring); made by :func:`local_environment`."""

    root: Path
    definition: Environment
    stack: LocalStack
    media_servers: dict[str, MediaMtxSandbox]
    kafka_bootstrap: str  # the stack's broker, or the private cluster the environment was made on
    services: dict[str, ServiceHandle] = field(default_factory=dict)
    jaeger: PrivateJaeger | None = None  # where the services send their spans, when traced

    @property
    def mediamtx(self) -> MediaMtxSandbox:
        """The first MediaMTX server (the default of new sites)."""
        return next(iter(self.media_servers.values()))

    @property
    def mediamtx_url(self) -> str:
        return self.mediamtx.url

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def kafka_prefix(self) -> str:
        return self.definition.kafka_prefix

    def service(self, name: str) -> ServiceHandle:
        return self.services[name]

    def url(self, name: str) -> str:
        return self.services[name].url

    def env_of(self, name: str) -> dict[str, str]:
        """The service's generated env file (names of secret files, never secrets), with an instance's
        overlay over it when ``name`` is an instance (``sense-reconciler@2``)."""
        service = self.services[name].service.name
        env = read_env_file(self.root / "env" / f"{service}.env")
        if name != service:
            env.update(read_env_file(self.root / "env" / f"{name}.env"))
        return env

    def set_setting(self, name: str, setting: str, value: str | None) -> None:
        """Set (or replace) an operator setting in the service's env file, as an operator edits
        ``.local/env``; the service reads it at its next start. ``setting`` is the full env var name;
        ``None`` removes it."""
        path = self.root / "env" / f"{name}.env"
        lines = [
            line
            for line in path.read_text(encoding="utf-8").splitlines()
            if not line.startswith(f"{setting}=")
        ]
        if value is not None:
            lines.append(f"{setting}={shlex.quote(value)}")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def secret_file(self, name: str, setting: str) -> Path:
        """The secret file a setting of the service names (e.g. ``API_TOKEN_FILE``)."""
        service = self.services[name].service
        return Path(self.env_of(name)[f"{service.env_prefix}{setting}"])

    def log_file(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    def pid(self, name: str) -> int | None:
        try:
            return int((self.root / "run" / f"{name}.pid").read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def topic(self, logical: str) -> str:
        return self.kafka_prefix + logical

    def exec_args(self, name: str, *command: str) -> list[str]:
        """A command line running ``command`` with the service's runtime env (``services.sh exec``)."""
        return ["bash", str(SERVICES_SCRIPT), "exec", name, *command]

    def script_env(self) -> dict[str, str]:
        return {**os.environ, "YOVISION_ENV_DIR": str(self.root)}

    async def services_script(self, action: str, *names: str, within_seconds: float) -> None:
        process = await asyncio.create_subprocess_exec(
            "bash",
            str(SERVICES_SCRIPT),
            action,
            *names,
            cwd=REPO_ROOT,
            env=self.script_env(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            output, _ = await asyncio.wait_for(process.communicate(), within_seconds)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise AssertionError(
                f"services.sh {action} {' '.join(names)}: no answer in {within_seconds:.0f}s"
            ) from None
        if process.returncode != 0:
            tail = "\n".join(output.decode(errors="replace").splitlines()[-40:])
            raise AssertionError(
                f"services.sh {action} {' '.join(names)} exited {process.returncode}:\n{tail}"
            )

    async def start(self, *names: str) -> None:
        """Start the named services (all when none is named); idempotent for running ones."""
        await self.services_script("up", *names, within_seconds=SERVICES_UP_TIMEOUT_SECONDS)

    async def stop(self, *names: str) -> None:
        await self.services_script("down", *names, within_seconds=SERVICES_DOWN_TIMEOUT_SECONDS)

    async def kill(self, name: str) -> None:
        """SIGKILL the service's process group (the service and any child, such as ffmpeg), as a crash of
        its container would; waits until the service is gone."""
        pid = self.pid(name)
        if pid is None:
            raise AssertionError(f"{name} is not running")
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(pid) == pid:  # services.sh starts each service as its own session leader
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + KILL_WAIT_SECONDS
        while _alive(pid):
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} (pid {pid}) still alive after SIGKILL")
            await asyncio.sleep(0.05)

    async def restart_after_kill(self, name: str) -> None:
        await self.kill(name)
        await self.start(name)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie is not running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _run(*args: str, env: Mapping[str, str] | None = None) -> None:
    completed = subprocess.run(
        list(args), cwd=REPO_ROOT, env=dict(env or os.environ), capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise AssertionError(
            f"{' '.join(args[:3])}... exited {completed.returncode}: {completed.stderr[-2000:]}"
        )


KEPT_RUNS = 5


def _keep_logs(root: Path, keep: Path) -> None:
    """Copy the environment's service logs to ``keep`` (under the stack's ``.local``, so a CI run's logs
    outlive pytest's temporary folders), leaving only the newest KEPT_RUNS runs there."""
    if (root / "logs").is_dir():
        shutil.copytree(root / "logs", keep / "logs", dirs_exist_ok=True)
    runs = sorted(keep.parent.iterdir(), key=lambda p: p.stat().st_mtime) if keep.parent.is_dir() else []
    for old in runs[:-KEPT_RUNS]:
        shutil.rmtree(old, ignore_errors=True)


async def _drop_everything(stack: LocalStack, definition: Environment, kafka_bootstrap: str) -> None:
    admin = await asyncpg.connect(stack.admin_dsn)
    try:
        for service in LOCAL_SERVICES:
            name = definition.schema(service)
            if name is None:
                continue
            schema = Identifier(name)
            plan = SchemaPlan(schema, Identifier(f"{schema}_owner"), Identifier(f"{schema}_app"), ())
            await drop(admin, plan)
    finally:
        await admin.close()
    await drop_database_role(stack.admin_dsn, Identifier(definition.identity_role))
    kafka = admin_client(kafka_bootstrap)
    await kafka.start()
    try:
        ours = [t for t in await kafka.list_topics() if t.startswith(definition.kafka_prefix)]
        if ours:
            await kafka.delete_topics(ours)
    finally:
        await kafka.close()


def environment_definition(
    name: str,
    ports: Mapping[str, int],
    settings: Mapping[str, str] | None = None,
    *,
    identity_ports: tuple[int, int] = IDENTITY_PORTS,
    instances: int = 1,
) -> Environment:
    """The definition of a test environment: the caller's operator `settings` over `TEST_SETTINGS`. A
    caller may confine probes to other networks, never lift the confinement (a blank value is refused),
    and never let probes ask DNS (the resolver stays the hosts file)."""
    merged = {**TEST_SETTINGS, **(settings or {})}
    if not merged[PROBE_CONFINEMENT_SETTING].strip():
        raise ValueError(f"test environments confine probes: {PROBE_CONFINEMENT_SETTING} cannot be blank")
    if merged[PROBE_RESOLVER_SETTING] != TEST_PROBE_RESOLVER:
        raise ValueError(
            f"test environments resolve probe names from the hosts file: {PROBE_RESOLVER_SETTING}"
        )
    return Environment(name, ports, merged, identity_ports, instances)


def _traced_settings(jaeger: PrivateJaeger, settings: Mapping[str, str] | None) -> dict[str, str]:
    """Every service's spans to the private Jaeger, and the console reading it (`settings` win)."""
    return {
        **{f"{s.env_prefix}TRACING_OTLP_ENDPOINT": jaeger.otlp_http_url for s in LOCAL_SERVICES},
        "CONSOLE_JAEGER_URL": jaeger.query_url,
        **(settings or {}),
    }


def _write_stack_env(
    root: Path,
    stack: LocalStack,
    bootstrap: str,
    servers: Mapping[str, MediaMtxSandbox],
    jaeger: PrivateJaeger | None,
) -> None:
    """`stack.env`: the servers the environment's tools (`make doctor`, `services.sh`) reach."""
    registrations = {
        server_id: {"api_url": server.url, "credentials_file": str(server.credentials_file)}
        for server_id, server in servers.items()
    }
    (root / "stack.env").write_text(
        f"YOVISION_PG_ADMIN_DSN_FILE={stack.admin_dsn_file}\n"
        f"YOVISION_KAFKA_BOOTSTRAP={bootstrap}\n"
        f"YOVISION_MEDIAMTX_API_URL={next(iter(servers.values())).url}\n"
        f"YOVISION_MEDIA_SERVERS={shlex.quote(json.dumps(registrations))}\n"
        + (f"YOVISION_JAEGER_QUERY_URL={jaeger.query_url}\n" if jaeger is not None else ""),
        encoding="utf-8",
    )


def _write_env_files(root: Path, definition: Environment) -> None:
    """The services' env files and secrets, written by `devsecrets` as `make secrets` writes the stack's."""
    _run(
        sys.executable,
        "-m",
        "yovision_platform.tools.devsecrets",
        str(root),
        "--name",
        definition.name,
        *(arg for service, port in definition.ports.items() for arg in ("--port", f"{service}={port}")),
        *(arg for key, value in definition.settings.items() for arg in ("--setting", f"{key}={value}")),
        "--identity-ports",
        ",".join(map(str, definition.identity_ports)),
        "--instances",
        str(definition.instances),
    )


@contextlib.asynccontextmanager
async def local_environment(
    root: Path,
    name: str,
    *,
    stack_dir: Path = REPO_ROOT / ".local",
    settings: Mapping[str, str] | None = None,
    media_servers: Sequence[str] = ("default",),
    instances: int = 1,
    kafka_bootstrap: str | None = None,
    traced: bool = False,
) -> AsyncIterator[LocalEnvironment]:
    """Make, start and finally remove the environment ``name`` in the empty folder ``root``.

    ``settings`` are operator settings (full env var names) added to the services' env files, exactly as
    an operator would add them to ``.local/env``, over ``TEST_SETTINGS`` (see `environment_definition`).
    ``media_servers``: the ids of the environment's MediaMTX servers, one private process each; the first is
    the default of new sites. ``instances``: processes per service (instance i >= 2 is ``<service>@i``, its
    own free port; ``services``, ``url``, ``pid``, ``kill`` and ``start`` take instance names too).
    ``kafka_bootstrap``: another Kafka than the stack's (a private cluster). ``traced``: a private Jaeger
    (`yovision_platform.tools.jaeger`) receives every service's spans, sampled at the services' default
    unless ``settings`` say otherwise, and the console draws its traces (``environment.jaeger``). The stack
    (PostgreSQL, Kafka) must be running."""
    if not media_servers:
        raise ValueError("an environment needs at least one MediaMTX server")
    if not name:
        raise ValueError("an environment needs a name (the unnamed one is the local stack of `make up`)")
    stack = LocalStack.load(stack_dir)
    root.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, before anything runs
    every_instance = [instance_name(s.name, i) for s in LOCAL_SERVICES for i in range(1, instances + 1)]
    ports = {instance: free_port() for instance in every_instance}
    bootstrap = kafka_bootstrap or stack.kafka_bootstrap
    binary = stack_dir / "bin" / "mediamtx"
    async with contextlib.AsyncExitStack() as cleanup:
        jaeger = None
        if traced:
            jaeger = cleanup.enter_context(private_jaeger(root / "jaeger", label=f"{name}-jaeger"))
            settings = _traced_settings(jaeger, settings)
        definition = environment_definition(
            name, ports, settings, identity_ports=(free_port(), free_port()), instances=instances
        )
        servers = {
            server_id: await cleanup.enter_async_context(
                mediamtx_sandbox(binary, root, label=f"{name}-{server_id}")
            )
            for server_id in media_servers
        }
        _write_stack_env(root, stack, bootstrap, servers, jaeger)
        cleanup.push_async_callback(_drop_everything, stack, definition, bootstrap)
        _run(sys.executable, str(CREATE_TOPICS_SCRIPT), "--bootstrap", bootstrap, "--prefix", f"{name}.")
        _write_env_files(root, definition)
        environment = LocalEnvironment(root, definition, stack, servers, bootstrap, jaeger=jaeger)
        for service in LOCAL_SERVICES:
            for i in range(1, instances + 1):
                environment.services[instance_name(service.name, i)] = ServiceHandle(
                    service, definition.schema(service), ports[instance_name(service.name, i)]
                )
        cleanup.callback(_keep_logs, root, stack_dir / "e2e-runs" / name)
        cleanup.push_async_callback(environment.stop)
        await environment.start()
        yield environment
