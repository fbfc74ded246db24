"""The set-up of the compose stack's identity provider (ORY Hydra, infra/compose.yaml), run as one-shots with
an application image's Python and `yovision_platform`, as `make up` sets up its own
(`yovision_platform.tools.identity_provider`):

- ``database ADMIN_DSN_FILE DSN_FILE``: the login role of DSN_FILE, with that DSN's password, owning a schema
  of its own name (its search path): Hydra's migrations create their tables there and nowhere else.
- ``clients ISSUER ADMIN_URL CONSOLE_URL SECRETS_DIR [--timeout-seconds N]``: waits (at most N seconds,
  default 60) until Hydra is ready and its JWKS serves a key (Hydra makes its keys on the first request
  that needs them), then registers the environment's clients (`identity_provider.clients`: the console,
  dev-token, the machine clients), each with the secret of the file
  ``SECRETS_DIR/identity_client_<client id, "-" as "_">``.

Both are idempotent. Each prints what it did, never a secret; exit 1 with one line naming what failed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx

from yovision_platform.storage import Identifier
from yovision_platform.tools.hydra import (
    READY_TIMEOUT_SECONDS,
    HydraAdmin,
    create_database_role,
    wait_until_ready,
)
from yovision_platform.tools.identity_provider import clients
from yovision_platform.web import AUDIENCES

READY_TIMEOUT_SECONDS_DEFAULT = READY_TIMEOUT_SECONDS


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8").strip()


def secret_file(secrets_dir: Path, client_id: str) -> Path:
    return secrets_dir / f"identity_client_{client_id.replace('-', '_')}"


async def database(admin_dsn_file: Path, dsn_file: Path) -> None:
    parts = urlsplit(read(dsn_file))
    role = Identifier(unquote(parts.username or ""))
    await create_database_role(read(admin_dsn_file), role, unquote(parts.password or ""))
    print(f"identity-provider-setup: role and schema {role} ready", flush=True)


async def register(
    issuer: str, admin_url: str, console_url: str, secrets_dir: Path, timeout_seconds: float
) -> None:
    await wait_until_ready(issuer, admin_url, timeout_seconds=timeout_seconds)
    async with httpx.AsyncClient(timeout=10.0) as http:
        admin = HydraAdmin(admin_url, http)
        for client in clients(console_url, AUDIENCES):
            await admin.ensure_client(client, read(secret_file(secrets_dir, client.client_id)))
            print(f"identity-provider-setup: client {client.client_id} registered", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="identity-provider-setup", description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="action", required=True)
    db = actions.add_parser("database")
    db.add_argument("admin_dsn_file", type=Path)
    db.add_argument("dsn_file", type=Path)
    reg = actions.add_parser("clients")
    reg.add_argument("issuer")
    reg.add_argument("admin_url")
    reg.add_argument("console_url")
    reg.add_argument("secrets_dir", type=Path)
    reg.add_argument("--timeout-seconds", type=float, default=READY_TIMEOUT_SECONDS_DEFAULT)
    args = parser.parse_args(argv)
    try:
        if args.action == "database":
            asyncio.run(database(args.admin_dsn_file, args.dsn_file))
        else:
            target = (args.issuer, args.admin_url, args.console_url, args.secrets_dir)
            asyncio.run(register(*target, args.timeout_seconds))
    except RuntimeError as error:  # this script's and HydraAdmin's own messages: no secret in them
        print(f"identity-provider-setup: {args.action} failed: {error}", file=sys.stderr)
        return 1
    except Exception as error:  # a database or file error: its kind only, never its text
        print(f"identity-provider-setup: {args.action} failed: {type(error).__name__}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
