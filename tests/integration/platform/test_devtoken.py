"""`make dev-token` through the real Hydra: a user signs in and gets a token for one service with exactly the
permissions asked for; a machine client gets its own; and the token verifies as every service verifies."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from urllib.parse import urlsplit

import jwt
import pytest

from tests.support.issuers import HydraIssuer
from yovision_platform.tools import identity_provider
from yovision_platform.tools.localhost import write_private_file
from yovision_platform.web import AccessTokenVerifier, Identity, IssuerKeys

EXIT_OK, EXIT_USAGE = 0, 2


@pytest.fixture
def env_dir(hydra: HydraIssuer, tmp_path: Path) -> Path:
    """An environment folder naming the session's Hydra, as `make secrets` writes one."""
    for client_id, secret in hydra.secrets.items():
        write_private_file(identity_provider.client_secret_file(tmp_path, client_id), secret + "\n")
    identity_provider.write_settings(
        tmp_path,
        public_port=int(urlsplit(hydra.issuer).port or 0),
        admin_port=int(urlsplit(hydra.admin.url).port or 0),
        dsn_file=write_private_file(tmp_path / "secrets" / "dsn", "postgresql://unused@127.0.0.1/x\n"),
        secret_file=write_private_file(tmp_path / "secrets" / "system", "unused\n"),
        console_url="http://127.0.0.1:9",
    )
    return tmp_path


async def devtoken(env_dir: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "yovision_platform.tools.devtoken",
        *args,
        str(env_dir),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode().strip(), err.decode()


async def verified(hydra: HydraIssuer, token: str, audience: str) -> Identity:
    async with hydra.jwks_client() as http:
        keys = IssuerKeys(hydra.jwks_url, frozenset({"RS256"}), http)
        try:
            return await AccessTokenVerifier(keys, hydra.issuer, audience).verify(token)
        finally:
            await keys.aclose()


@pytest.mark.parametrize("subject", ["alice", "a" * 128], ids=["alice", "subject-of-128"])
async def test_a_user_signs_in_and_gets_exactly_the_permissions_asked_for(
    hydra: HydraIssuer, env_dir: Path, subject: str
) -> None:
    code, token, err = await devtoken(
        env_dir, "--service", "signal-watcher", "--sub", subject, "--perm", "signal:read"
    )
    assert code == EXIT_OK, err
    assert await verified(hydra, token, "signal-watcher") == Identity(subject, frozenset({"signal:read"}))
    assert jwt.decode(token, options={"verify_signature": False})["aud"] == ["signal-watcher"]


async def test_a_machine_client_acts_as_itself(hydra: HydraIssuer, env_dir: Path) -> None:
    code, token, err = await devtoken(
        env_dir, "--service", "sense-reconciler", "--client", "operator-cli", "--perm", "sense:read"
    )
    assert code == EXIT_OK, err
    assert await verified(hydra, token, "sense-reconciler") == Identity(
        "operator-cli", frozenset({"sense:read"})
    )


@pytest.mark.parametrize(
    "args",
    [
        ("--service", "signal-watcher", "--sub", "a" * 129),
        ("--service", "signal-watcher", "--sub", "alice", "--perm", "Everything"),
        ("--service", "console", "--sub", "alice"),
        ("--service", "signal-watcher", "--client", "nobody"),
    ],
    ids=["subject-over-128", "not-a-permission", "not-a-service", "not-a-machine-client"],
)
async def test_a_request_no_token_could_answer_is_refused_before_any_sign_in(
    env_dir: Path, args: tuple[str, ...]
) -> None:
    code, out, err = await devtoken(env_dir, *args)
    assert (code, out) == (EXIT_USAGE, "")
    assert "a" * 129 not in err
