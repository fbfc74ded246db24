"""The OpenID provider of an environment (ORY Hydra, `yovision_platform.tools.hydra`), as `make up` and
the end-to-end environments run it: `python -m yovision_platform.tools.identity_provider
up|down|status [ENV_DIR]` (default `.local`), called by `infra/scripts/services.sh` before the services
start and after they stop.

`devsecrets` writes the environment's `env/identity-provider.env` (`write_settings`): its ports, its
database role's DSN file, its system secret file and the console's URL; and one secret per OAuth 2.0
client (`clients`). `up` creates the role and its schema, runs Hydra's migrations, starts Hydra
(pid in `run/identity-provider.pid`, log `logs/identity-provider.log`), waits until it is ready and
registers the clients, with their secrets, idempotently. A running provider only gets its clients set
again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx

from yovision_platform.localstack import LocalStack, read_env_file
from yovision_platform.storage import Identifier
from yovision_platform.tools import hydra
from yovision_platform.tools.hydra import ClientSpec, HydraAdmin, HydraInstance
from yovision_platform.web import AUDIENCES, PERMISSIONS

__all__ = [
    "CONSOLE_CLIENT",
    "DEV_TOKEN_CLIENT",
    "ENV_FILE",
    "NAME",
    "IdentityProvider",
    "clients",
    "main",
]

NAME = "identity-provider"
ENV_FILE = f"{NAME}.env"
CONSOLE_CLIENT = "console"
DEV_TOKEN_CLIENT = "dev-token"  # noqa: S105 (a client's name)
# A redirect URI nothing serves: `make dev-token` and the tests read the code off the redirect itself.
DEV_TOKEN_REDIRECT = "http://127.0.0.1/dev-token/callback"  # noqa: S105 (a URL)
MACHINE_CLIENTS = ("operator-cli", "bench")
STOP_TIMEOUT_SECONDS = 15.0
HEALTH_TIMEOUT_SECONDS = 10.0


def clients(console_url: str, audiences: Sequence[str]) -> tuple[ClientSpec, ...]:
    """Every OAuth 2.0 client of an environment: the console and `make dev-token` act for signed-in users;
    each machine integration has a `client_credentials` client of its own, its id the audit actor."""
    user_scopes = ("openid", "offline_access", *PERMISSIONS)
    user_facing = ("authorization_code", "refresh_token")
    return (
        ClientSpec(
            CONSOLE_CLIENT,
            user_scopes,
            tuple(audiences),
            user_facing,
            redirect_uris=(f"{console_url}/oidc/callback",),
            post_logout_redirect_uris=(f"{console_url}/",),
        ),
        ClientSpec(DEV_TOKEN_CLIENT, user_scopes, tuple(audiences), user_facing, (DEV_TOKEN_REDIRECT,)),
        *(ClientSpec(client_id, PERMISSIONS, tuple(audiences)) for client_id in MACHINE_CLIENTS),
    )


def client_secret_file(local_dir: Path, client_id: str) -> Path:
    return local_dir / "secrets" / f"identity-client-{client_id}.secret"


@dataclass(frozen=True)
class IdentityProvider:
    """An environment's provider, as its env file describes it."""

    local_dir: Path
    instance: HydraInstance
    role: Identifier
    password: str
    clients: tuple[ClientSpec, ...]

    @classmethod
    def load(cls, local_dir: Path, audiences: Sequence[str]) -> IdentityProvider:
        env = read_env_file(local_dir / "env" / ENV_FILE)
        dsn = Path(env["IDENTITY_DSN_FILE"]).read_text(encoding="utf-8").strip()
        parts = urlsplit(dsn)
        instance = HydraInstance(
            public_port=int(env["IDENTITY_PUBLIC_PORT"]),
            admin_port=int(env["IDENTITY_ADMIN_PORT"]),
            dsn=dsn,
            system_secret=Path(env["IDENTITY_SYSTEM_SECRET_FILE"]).read_text(encoding="utf-8").strip(),
            console_url=env["IDENTITY_CONSOLE_URL"],
            work_dir=local_dir / "run",
        )
        return cls(
            local_dir,
            instance,
            Identifier(unquote(parts.username or "")),
            unquote(parts.password or ""),
            clients(instance.console_url, audiences),
        )

    @property
    def pid_file(self) -> Path:
        return self.local_dir / "run" / f"{NAME}.pid"

    def secret(self, client_id: str) -> str:
        return client_secret_file(self.local_dir, client_id).read_text(encoding="utf-8").strip()

    def running_pid(self) -> int | None:
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
            pid = int(self.pid_file.read_text().strip())
            os.kill(pid, 0)
            if "hydra" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                return pid
        return None

    async def up(self, admin_dsn: str) -> None:
        instance = self.instance
        if self.running_pid() is None:
            await hydra.create_database_role(admin_dsn, self.role, self.password)
            log_file = self.local_dir / "logs" / f"{NAME}.log"
            log_file.parent.mkdir(parents=True, exist_ok=True)
            instance.work_dir.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(hydra.migrate, instance, log_file)
            process = hydra.start(instance, log_file)
            self.pid_file.write_text(f"{process.pid}\n", encoding="utf-8")
            await hydra.wait_ready(instance, process)
        else:
            await hydra.wait_ready(instance)
        async with httpx.AsyncClient(timeout=10.0) as http:
            admin = HydraAdmin(instance.admin_url, http)
            for client in self.clients:
                await admin.ensure_client(client, self.secret(client.client_id))

    def down(self) -> None:
        pid = self.running_pid()
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
            while self.running_pid() is not None and time.monotonic() < deadline:
                time.sleep(0.1)
            if self.running_pid() is not None:
                os.kill(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)

    async def healthy(self) -> bool:
        """Ready, and its JWKS serves at least one key."""
        async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_SECONDS) as http:
            try:
                ready = await http.get(f"{self.instance.admin_url}/health/ready")
                jwks = await http.get(f"{self.instance.issuer}/.well-known/jwks.json")
                return ready.status_code == 200 and jwks.status_code == 200 and bool(jwks.json().get("keys"))
            except (httpx.HTTPError, ValueError):
                return False


def write_settings(
    local_dir: Path, *, public_port: int, admin_port: int, dsn_file: Path, secret_file: Path, console_url: str
) -> Path:
    """The environment's `env/identity-provider.env` (names secret files, holds no secret)."""
    path = local_dir / "env" / ENV_FILE
    lines = [
        f"# {NAME}: generated by `make secrets`; names secret files, holds no secret",
        f"IDENTITY_PUBLIC_PORT={public_port}",
        f"IDENTITY_ADMIN_PORT={admin_port}",
        f"IDENTITY_DSN_FILE={dsn_file}",
        f"IDENTITY_SYSTEM_SECRET_FILE={secret_file}",
        f"IDENTITY_CONSOLE_URL={console_url}",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def _main(action: str, local_dir: Path) -> int:
    provider = IdentityProvider.load(local_dir, AUDIENCES)
    if action == "up":
        await provider.up(LocalStack.load(local_dir).admin_dsn)
        print(f"{NAME}: ready at {provider.instance.issuer}", file=sys.stderr)
        return 0
    if action == "down":
        provider.down()
        return 0
    healthy = await provider.healthy()
    print(f"{NAME:<17} healthy  {provider.instance.issuer}" if healthy else f"{NAME:<17} down")
    return 0 if healthy else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=NAME, description="the environment's OpenID provider (ORY Hydra)")
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("dir", nargs="?", default=os.environ.get("YOVISION_ENV_DIR", ".local"))
    args = parser.parse_args(argv)
    local_dir = Path(args.dir).resolve()
    if not (local_dir / "env" / ENV_FILE).is_file():
        print(f"{NAME}: {local_dir}/env/{ENV_FILE} missing: run `make secrets` first", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_main(args.action, local_dir))
    except RuntimeError as exc:
        print(f"{NAME}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
