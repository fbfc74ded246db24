"""Generate local development secrets and env files per service (`make secrets`, part of `make up`).

For each service: a runtime-role password (kept once generated), a runtime DSN file and an env file
`<dir>/env/<service>.env` naming the files -- never the secrets themselves. Sense and orphan-scanner get
every MediaMTX server of the stack (`*_MEDIA_SERVERS`, with each server's API credentials file, see
`yovision_platform.localstack`); Sense also a key ring for its source URIs. The migration DSN is the local
cluster's admin DSN. Every secret file is written 0600. Re-running changes nothing that exists.

One folder is one *environment* of the five services and the console (``make up`` uses ``.local``). An
environment with a name (``--name e2e-1a2b``) shares the PostgreSQL cluster and the Kafka broker of the
stack with every other environment, isolated by name: schemas ``e2e_1a2b_sense``..., a Kafka prefix
``e2e-1a2b.`` for topics and consumer groups, its own HTTP ports (``--port sense-reconciler=18181``), its
own secrets, media folder, pid and log files. ``--setting NAME=VALUE`` adds an operator setting (a full env
var name such as ``SIGNAL_PROBE_ALLOWED_NETWORKS``) to the env file of the service whose prefix it carries.
``--instances 2`` (``make up INSTANCES=2``) adds a second process per service: ``env/<service>@2.env`` holds
what differs from the first (its port, ``--port sense-reconciler@2=...``, by default the first's plus 100).
The end-to-end suite makes its environments with this tool, so they are configured exactly as ``make up``
configures the local stack (``yovision_platform.tools.environment``).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from yovision_platform.localstack import LocalStack, runtime_dsn
from yovision_platform.tools import identity_provider
from yovision_platform.tools.localhost import write_private_file
from yovision_platform.web import AUDIENCES

__all__ = ["DEFAULT_ENVIRONMENT", "LOCAL_SERVICES", "Environment", "generate", "instance_name", "main"]

# The stack's Jaeger (infra/scripts/stack/jaeger.sh, infra/jaeger/jaeger.yml): where `make up`'s services
# send their spans. A named environment (the tests') sets its own, or none.
STACK_OTLP_ENDPOINT = "http://127.0.0.1:14318"


@dataclass(frozen=True)
class LocalService:
    """One service of an environment; ``schema`` is None for a service without a database (the console)."""

    name: str
    schema: str | None
    env_prefix: str
    http_port: int


LOCAL_SERVICES = (
    LocalService("sense-reconciler", "sense", "SENSE_", 18081),
    LocalService("orphan-scanner", "orphan", "ORPHAN_", 18082),
    LocalService("bell-receiver", "bell", "BELL_", 18083),
    LocalService("signal-watcher", "signal", "SIGNAL_", 18084),
    LocalService("media-worker", "media", "MEDIA_", 18085),
    LocalService("console", None, "CONSOLE_", 18080),
)


SERVICE_BY_NAME = {service.name: service for service in LOCAL_SERVICES}
IDENTITY_PORTS = (14444, 14445)
ENVIRONMENT_NAME_PATTERN = re.compile(r"[a-z][a-z0-9-]{0,23}")
SETTING_PATTERN = re.compile(r"([A-Z]+_)[A-Z0-9_]+")
MAX_INSTANCES = 4
INSTANCE_PORT_STEP = 100  # sense-reconciler@2 on 18181, console@2 on 18180 in the local stack


def instance_name(service: str, instance: int) -> str:
    """How infra/scripts/services.sh names an instance: its pid, log and env overlay files."""
    return service if instance == 1 else f"{service}@{instance}"


@dataclass(frozen=True)
class Environment:
    """One deployment of the five services on the shared local stack. The unnamed environment is the
    local stack of ``make up``: schemas ``sense``..., no Kafka prefix, ports 18081..18085."""

    name: str = ""
    ports: Mapping[str, int] = field(default_factory=dict)
    settings: Mapping[str, str] = field(default_factory=dict)
    # the identity provider's public (issuer) and admin ports
    identity_ports: tuple[int, int] = IDENTITY_PORTS
    # processes per service: instance 1 is `<service>`, instance i >= 2 `<service>@i` (its own port)
    instances: int = 1

    def __post_init__(self) -> None:
        if self.name and ENVIRONMENT_NAME_PATTERN.fullmatch(self.name) is None:
            raise ValueError("environment name must match [a-z][a-z0-9-]{0,23}")
        if not 1 <= self.instances <= MAX_INSTANCES:
            raise ValueError(f"instances must be 1..{MAX_INSTANCES}")
        known = {instance_name(s.name, i) for s in LOCAL_SERVICES for i in range(1, self.instances + 1)}
        if unknown := set(self.ports) - known:
            raise ValueError(f"unknown services or instances: {sorted(unknown)}")
        prefixes = {service.env_prefix for service in LOCAL_SERVICES}
        for setting in self.settings:
            match = SETTING_PATTERN.fullmatch(setting)
            if match is None or match.group(1) not in prefixes:
                raise ValueError(f"{setting}: not a setting of one of the services")

    def schema(self, service: LocalService) -> str | None:
        if service.schema is None:
            return None
        return f"{self.name.replace('-', '_')}_{service.schema}" if self.name else service.schema

    @property
    def kafka_prefix(self) -> str:
        return f"{self.name}." if self.name else ""

    def port(self, service: LocalService, instance: int = 1) -> int:
        """The instance's HTTP port: the one given, else the service's default plus
        INSTANCE_PORT_STEP per instance after the first."""
        default = service.http_port + INSTANCE_PORT_STEP * (instance - 1)
        return self.ports.get(instance_name(service.name, instance), default)

    @property
    def identity_role(self) -> str:
        """The identity provider's database role, owner of the schema of the same name."""
        return f"{self.name.replace('-', '_')}_hydra" if self.name else "hydra"

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.identity_ports[0]}"


DEFAULT_ENVIRONMENT = Environment()
AUDIT_PUSH_KEY_ID = "relay-dev-1"
# The stack's Prometheus (infra/scripts/stack/prometheus.sh): the alerts the console of `make up` lists.
STACK_PROMETHEUS_URL = "http://127.0.0.1:19090"
SENSE_SECRETS_KEY_ID = "k1"
# The query API of the stack's Jaeger (infra/scripts/stack/jaeger.sh: JAEGER_QUERY_URL); a test environment
# gets the one of its private Jaeger, if any, as a setting.
STACK_JAEGER_QUERY_URL = "http://127.0.0.1:16686"


def _ensure_secret(path: Path, make: str) -> bool:
    """Write `make` to `path` (0600) unless the file exists; True when written."""
    if path.exists():
        return False
    write_private_file(path, make + "\n")
    return True


def _extra_secrets(
    local_dir: Path, service: LocalService, environment: Environment
) -> tuple[list[str], list[Path]]:
    """Service-specific secret files and the env lines naming them (all keys: hex of 32 random bytes)."""
    secret_dir = local_dir / "secrets"
    p = service.env_prefix
    files: dict[Path, str] = {}
    lines: list[str] = []
    if service.schema is not None:
        # every API takes the access tokens of the environment's OpenID provider (audience: the service)
        lines.append(f"{p}AUTH_ISSUER={environment.issuer}")
    relay_key = secret_dir / f"bell-{AUDIT_PUSH_KEY_ID}.key"
    if service.schema == "sense":
        files[relay_key] = secrets.token_hex(32)
        # the key ring that encrypts source URIs at rest (docs/runbooks/rotating-keys.md adds keys)
        source_key = secret_dir / f"sense-secrets-{SENSE_SECRETS_KEY_ID}.key"
        files[source_key] = secrets.token_hex(32)
        lines += [
            f"""{p}SECRETS_KEY_FILES='{{"{SENSE_SECRETS_KEY_ID}":"{source_key}"}}'""",
            f"{p}SECRETS_ACTIVE_KEY_ID={SENSE_SECRETS_KEY_ID}",
            # the signed audit push to the local bell-receiver (plain HTTP is allowed on loopback only)
            f"{p}AUDIT_PUSH_ENABLED=true",
            f"{p}BELL_URL=http://127.0.0.1:{environment.port(SERVICE_BY_NAME['bell-receiver'])}",
            f"{p}BELL_KEY_FILE={relay_key}",
            f"{p}BELL_KEY_ID={AUDIT_PUSH_KEY_ID}",
        ]
    if service.schema == "bell":
        files[relay_key] = secrets.token_hex(32)
        # single-quoted: the env file is sourced by bash, and the value is JSON
        lines.append(f"""{p}AUDIT_PUSH_KEY_FILES='{{"{AUDIT_PUSH_KEY_ID}":"{relay_key}"}}'""")
    if service.schema == "signal":
        aes_key = secret_dir / "signal-secrets-aes.key"
        files[aes_key] = secrets.token_hex(32)
        lines.append(f"{p}SECRETS_AES_KEY_FILE={aes_key}")
    if service.schema is None:
        lines += _console_lines(local_dir, environment, files)
    written = [path for path, value in files.items() if _ensure_secret(path, value)]
    return lines, written


def _console_lines(local_dir: Path, environment: Environment, files: dict[Path, str]) -> list[str]:
    """The console: the five services' URLs, its OpenID client at the environment's provider, (the dev
    login, which only this tool turns on) the provider's admin API, to serve its login and consent pages,
    and, for the stack of `make up` (the unnamed environment), the stack's Jaeger and Prometheus."""
    secret_dir = local_dir / "secrets"
    session_key = secret_dir / "console-session.key"
    files[session_key] = secrets.token_hex(32)
    url = {s.name: f"http://127.0.0.1:{environment.port(s)}" for s in LOCAL_SERVICES}
    client_secret = identity_provider.client_secret_file(local_dir, identity_provider.CONSOLE_CLIENT)
    return [
        f"CONSOLE_SESSION_KEY_FILE={session_key}",
        f"CONSOLE_SENSE_URL={url['sense-reconciler']}",
        f"CONSOLE_ORPHAN_URL={url['orphan-scanner']}",
        f"CONSOLE_BELL_URL={url['bell-receiver']}",
        f"CONSOLE_SIGNAL_URL={url['signal-watcher']}",
        f"CONSOLE_MEDIA_URL={url['media-worker']}",
        f"CONSOLE_OIDC_ISSUER={environment.issuer}",
        f"CONSOLE_OIDC_CLIENT_ID={identity_provider.CONSOLE_CLIENT}",
        f"CONSOLE_OIDC_CLIENT_SECRET_FILE={client_secret}",
        f"CONSOLE_DEV_LOGIN_ADMIN_URL=http://127.0.0.1:{environment.identity_ports[1]}",
        *([] if environment.name else [f"CONSOLE_JAEGER_URL={STACK_JAEGER_QUERY_URL}"]),
        # A named (test) environment's services are not the ones the stack's Prometheus scrapes.
        *([] if environment.name else [f"CONSOLE_PROMETHEUS_URL={STACK_PROMETHEUS_URL}"]),
    ]


def _identity_provider(local_dir: Path, environment: Environment, stack: LocalStack) -> list[Path]:
    """The identity provider's env file, its role's DSN, its system secret and one secret per client."""
    secret_dir = local_dir / "secrets"
    dsn_file = secret_dir / "identity-provider.dsn"
    system_secret = secret_dir / "identity-provider-system.secret"
    console_url = f"http://127.0.0.1:{environment.port(SERVICE_BY_NAME['console'])}"
    files = {
        dsn_file: runtime_dsn(stack.admin_dsn, environment.identity_role, secrets.token_hex(24)),
        system_secret: secrets.token_urlsafe(32),
        **{
            identity_provider.client_secret_file(local_dir, client.client_id): secrets.token_urlsafe(32)
            for client in identity_provider.clients(console_url, AUDIENCES)
        },
    }
    written = [path for path, value in files.items() if _ensure_secret(path, value)]
    public_port, admin_port = environment.identity_ports
    written.append(
        identity_provider.write_settings(
            local_dir,
            public_port=public_port,
            admin_port=admin_port,
            dsn_file=dsn_file,
            secret_file=system_secret,
            console_url=console_url,
        )
    )
    return written


def generate(local_dir: Path, environment: Environment = DEFAULT_ENVIRONMENT) -> list[Path]:
    stack = LocalStack.load(local_dir)
    written: list[Path] = _identity_provider(local_dir, environment, stack)
    for service in LOCAL_SERVICES:
        p = service.env_prefix
        env_lines = [
            f"# {service.name}: generated by `make secrets`; names secret files, holds no secret",
            f"{p}HTTP_HOST=127.0.0.1",
            f"{p}HTTP_PORT={environment.port(service)}",
        ]
        schema = environment.schema(service)
        if schema is not None:
            dsn_file = local_dir / "secrets" / f"{service.schema}-runtime.dsn"
            if not dsn_file.exists():
                write_private_file(
                    dsn_file, runtime_dsn(stack.admin_dsn, f"{schema}_app", secrets.token_hex(24)) + "\n"
                )
                written.append(dsn_file)
            env_lines += [f"{p}KAFKA_BOOTSTRAP={stack.kafka_bootstrap}", f"{p}DATABASE_DSN_FILE={dsn_file}"]
        if environment.name and schema is not None:
            env_lines += [f"{p}DATABASE_SCHEMA={schema}", f"{p}KAFKA_PREFIX={environment.kafka_prefix}"]
        if service.schema in ("sense", "orphan"):
            # every MediaMTX server of the stack, with its API credentials file (single-quoted: JSON)
            env_lines.append(f"{p}MEDIA_SERVERS={shlex.quote(stack.media_servers_setting())}")
        if service.schema == "sense":
            env_lines.append(f"{p}MEDIA_SERVER_DEFAULT={stack.media_servers[0].id}")
        if service.schema == "media":
            env_lines += [
                f"{p}STORAGE_DIR={local_dir / 'media'}",
                f"{p}CAPABILITY_FILE={local_dir / 'run' / 'media-worker.capability'}",
            ]
        if not environment.name and f"{p}TRACING_OTLP_ENDPOINT" not in environment.settings:
            # Every change traced: the local stack is where one follows a single event's path.
            env_lines += [f"{p}TRACING_OTLP_ENDPOINT={STACK_OTLP_ENDPOINT}", f"{p}TRACING_SAMPLING_RATIO=1.0"]
        extra_lines, extra_files = _extra_secrets(local_dir, service, environment)
        env_lines += extra_lines
        env_lines += [
            f"{k}={shlex.quote(v)}" for k, v in sorted(environment.settings.items()) if k.startswith(p)
        ]
        written += extra_files
        env_file = local_dir / "env" / f"{service.name}.env"
        write_private_file(env_file, "\n".join(env_lines) + "\n")
        written.append(env_file)
        if schema is not None:
            # The admin DSN goes only to `migrate` (infra/scripts/services.sh), never to `serve`.
            migrate_env = local_dir / "env" / f"{service.name}.migrate.env"
            write_private_file(migrate_env, f"{p}MIGRATION_DSN_FILE={stack.admin_dsn_file}\n")
            written.append(migrate_env)
        written += _instance_overlays(local_dir, service, environment)
    return written


def _instance_overlays(local_dir: Path, service: LocalService, environment: Environment) -> list[Path]:
    """``env/<service>@i.env`` for each instance after the first: what differs from instance 1 (its port,
    the media worker's capability file). Overlays of instances beyond ``environment.instances`` are removed,
    so the last run of this tool decides how many instances ``services.sh up`` starts."""
    p = service.env_prefix
    for stale in (local_dir / "env").glob(f"{service.name}@*.env"):
        suffix = stale.name.removeprefix(f"{service.name}@").removesuffix(".env")
        if not suffix.isdigit() or int(suffix) > environment.instances:
            stale.unlink()
    written = []
    for instance in range(2, environment.instances + 1):
        name = instance_name(service.name, instance)
        lines = [
            f"# {name}: by `make secrets INSTANCES={environment.instances}`, read after {service.name}.env",
            f"{p}HTTP_PORT={environment.port(service, instance)}",
        ]
        if service.schema == "media":
            lines.append(f"{p}CAPABILITY_FILE={local_dir / 'run' / f'{name}.capability'}")
        overlay = local_dir / "env" / f"{name}.env"
        write_private_file(overlay, "\n".join(lines) + "\n")
        written.append(overlay)
    return written


def _pairs(values: Sequence[str], what: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise ValueError(f"{what} must look like NAME=VALUE")
        pairs[key] = rest
    return pairs


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="devsecrets", description="generate dev secrets and env files")
    parser.add_argument("dir", nargs="?", default=os.environ.get("YOVISION_LOCAL_DIR", ".local"))
    parser.add_argument("--name", default="", help="environment name (schemas, Kafka prefix); default none")
    parser.add_argument("--port", action="append", default=[], metavar="SERVICE[@INSTANCE]=PORT")
    parser.add_argument("--instances", type=int, default=1, help="processes per service (default 1)")
    parser.add_argument("--setting", action="append", default=[], metavar="ENV_VAR=VALUE")
    parser.add_argument(
        "--identity-ports", default=",".join(map(str, IDENTITY_PORTS)), metavar="PUBLIC,ADMIN"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    local_dir = Path(args.dir).resolve()
    try:
        ports = {name: int(port) for name, port in _pairs(args.port, "--port").items()}
        public, _, admin = args.identity_ports.partition(",")
        environment = Environment(
            args.name,
            ports,
            _pairs(args.setting, "--setting"),
            identity_ports=(int(public), int(admin)),
            instances=args.instances,
        )
    except ValueError as exc:
        print(f"devsecrets: {exc}", file=sys.stderr)
        return 2
    if not (local_dir / "stack.env").exists():
        print(f"devsecrets: {local_dir}/stack.env missing: start the stack first (make up)", file=sys.stderr)
        return 2
    for path in generate(local_dir, environment):
        print(f"devsecrets: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
