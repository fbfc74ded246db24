"""The one-shots that set up compose's identity provider (infra/docker/identity-provider-setup.py), run as
compose runs them but with the workspace's Python, against the real PostgreSQL and a Hydra of their own:
`database` makes Hydra's role and schema from its DSN file, `clients` waits for Hydra and registers the
environment's clients with the secrets of their files. Both are idempotent and print no secret."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest

from tests.deploy.alone import Installed
from tests.deploy.chart import REPO_ROOT
from tests.deploy.test_service_alone import image_env
from tests.support.stack import Stack
from yovision_platform.localstack import runtime_dsn
from yovision_platform.storage import Identifier
from yovision_platform.tools import hydra, identity_provider
from yovision_platform.tools.localhost import write_private_file
from yovision_platform.web import AUDIENCES

pytestmark = pytest.mark.infra

SCRIPT = REPO_ROOT / "infra" / "docker" / "identity-provider-setup.py"
CONSOLE_URL = "http://127.0.0.1:18080"


def run_setup(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(SCRIPT), *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)


async def test_database_makes_the_role_of_the_dsn_owning_its_schema(stack: Stack, tmp_path: Path) -> None:
    role = Identifier(f"hydra_{secrets.token_hex(5)}")
    dsn = runtime_dsn(stack.admin_dsn, str(role), secrets.token_hex(24))
    dsn_file = write_private_file(tmp_path / "identity_provider_dsn", dsn + "\n")
    try:
        for _ in (1, 2):  # idempotent
            result = await asyncio.to_thread(run_setup, "database", str(stack.admin_dsn_file), str(dsn_file))
            assert result.returncode == 0, result.stderr
            assert urlsplit(dsn).password not in result.stdout + result.stderr
        connection = await asyncpg.connect(dsn)
        try:
            assert await connection.fetchval("SHOW search_path") == str(role)
            owner = await connection.fetchval(
                "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = $1", str(role)
            )
            assert owner == str(role)
        finally:
            await connection.close()
    finally:
        await hydra.drop_database_role(stack.admin_dsn, role)


async def test_clients_registers_every_client_of_the_environment(stack: Stack, tmp_path: Path) -> None:
    secrets_dir = tmp_path / "secrets"
    client_secrets = {
        client.client_id: secrets.token_urlsafe(32)
        for client in identity_provider.clients(CONSOLE_URL, AUDIENCES)
    }
    for client_id, secret in client_secrets.items():
        write_private_file(secrets_dir / f"identity_client_{client_id.replace('-', '_')}", secret + "\n")
    async with hydra.private_hydra(stack.admin_dsn, tmp_path / "hydra", clients=()) as private:
        issuer, admin = private.instance.issuer, private.instance.admin_url
        for _ in (1, 2):  # idempotent
            args = ("clients", issuer, admin, CONSOLE_URL, str(secrets_dir))
            result = await asyncio.to_thread(run_setup, *args)
            assert result.returncode == 0, result.stderr
            assert not any(secret in result.stdout + result.stderr for secret in client_secrets.values())
        token = await hydra.machine_token(
            issuer,
            "operator-cli",
            client_secrets["operator-cli"],
            scopes=["sense:operate"],
            audiences=["sense-reconciler"],
        )
        assert token.count(".") == 2  # a JWT access token
        console = await private.admin.http.get(f"{admin}/admin/clients/{identity_provider.CONSOLE_CLIENT}")
        assert console.json()["redirect_uris"] == [f"{CONSOLE_URL}/oidc/callback"]


async def test_clients_gives_up_within_its_bound_when_hydra_never_answers(tmp_path: Path) -> None:
    nothing = "http://127.0.0.1:9"  # the discard port: nothing listens there
    started = time.monotonic()
    result = await asyncio.to_thread(
        run_setup, "clients", nothing, nothing, CONSOLE_URL, str(tmp_path), "--timeout-seconds", "2"
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "identity-provider-setup: clients failed: hydra was not ready within 2 s"
    # The script's own message says which bound it gave up on. The wall time tells a 2 s bound from the
    # default one (60 s) or none, and from nothing finer: under `make test`'s load the interpreter's start
    # and the polls took 7.3 s and 6.2 s in all in two runs, when a `--help` run just before took 0.35 s.
    assert time.monotonic() - started < hydra.READY_TIMEOUT_SECONDS / 2


def test_the_script_runs_with_the_python_of_the_image_compose_runs_it_with(
    alone: Callable[[str], Installed], tmp_path: Path
) -> None:
    """compose mounts it into the sense-reconciler image: what it imports must be in that image."""
    installed = alone("sense-reconciler")
    result = installed.run("python", str(SCRIPT), "--help", env=image_env(installed), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "database" in result.stdout and "clients" in result.stdout
