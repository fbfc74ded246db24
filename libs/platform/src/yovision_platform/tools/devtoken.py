"""An access token of the environment's OpenID provider, for a service's API: `python -m
yovision_platform.tools.devtoken --service signal-watcher --sub alice [--perm signal:read ...] [DIR]`
(`make dev-token SERVICE=… SUB=… PERMS=…`). Prints only the token.

A user's token: `alice` signs in through the `dev-token` client (authorization code with PKCE), the login
and consent accepted through the provider's admin API as the console's dev login accepts them, and is
granted the permissions asked for. `--client operator-cli` instead gets that machine client's own token
(`client_credentials`; its `sub` is the client id). Either way the token is one the provider signed:
nothing here holds a key that could mint one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import httpx

from yovision_platform.tools import hydra
from yovision_platform.tools.hydra import HydraAdmin, TokenSet
from yovision_platform.tools.identity_provider import DEV_TOKEN_CLIENT, MACHINE_CLIENTS, IdentityProvider
from yovision_platform.web import AUDIENCES, PERMISSION_PATTERN, SUBJECT_PATTERN

__all__ = ["machine_access_token", "main", "user_access_token", "user_tokens"]


async def user_tokens(
    local_dir: Path, subject: str, permissions: Sequence[str], audiences: Sequence[str]
) -> TokenSet:
    """`subject`'s tokens (access, refresh, ID) for `audiences`, with `permissions`, from the environment in
    `local_dir`, through the `dev-token` client."""
    provider = IdentityProvider.load(local_dir, AUDIENCES)
    client = next(c for c in provider.clients if c.client_id == DEV_TOKEN_CLIENT)
    async with httpx.AsyncClient(timeout=10.0) as http:
        return await hydra.signed_in_tokens(
            provider.instance.issuer,
            HydraAdmin(provider.instance.admin_url, http),
            client,
            provider.secret(DEV_TOKEN_CLIENT),
            subject=subject,
            permissions=permissions,
            audiences=audiences,
        )


async def user_access_token(
    local_dir: Path, subject: str, permissions: Sequence[str], audiences: Sequence[str]
) -> str:
    """`subject`'s access token for `audiences`, with `permissions`, from the environment in `local_dir`."""
    return (await user_tokens(local_dir, subject, permissions, audiences)).access_token


async def machine_access_token(
    local_dir: Path, client_id: str, permissions: Sequence[str], audiences: Sequence[str]
) -> str:
    """The machine client `client_id`'s own access token (`client_credentials`)."""
    provider = IdentityProvider.load(local_dir, AUDIENCES)
    return await hydra.machine_token(
        provider.instance.issuer,
        client_id,
        provider.secret(client_id),
        scopes=permissions,
        audiences=audiences,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="devtoken", description="an access token of the local provider")
    parser.add_argument("--service", required=True, choices=AUDIENCES, help="the audience")
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--sub", help="the user who signs in")
    who.add_argument("--client", choices=MACHINE_CLIENTS, help="a machine client, acting as itself")
    parser.add_argument("--perm", action="append", default=[], help="permission, repeatable (signal:read)")
    parser.add_argument("dir", nargs="?", default=os.environ.get("YOVISION_ENV_DIR", ".local"))
    args = parser.parse_args(argv)
    if args.sub is not None and SUBJECT_PATTERN.fullmatch(args.sub) is None:
        print("devtoken: --sub must be 1..128 of A-Z a-z 0-9 . _ : @ -", file=sys.stderr)
        return 2
    if not all(PERMISSION_PATTERN.fullmatch(p) for p in args.perm):
        print("devtoken: each --perm looks like service:action", file=sys.stderr)
        return 2
    local_dir = Path(args.dir).resolve()
    try:
        if args.sub is not None:
            token = asyncio.run(user_access_token(local_dir, args.sub, args.perm, [args.service]))
        else:
            token = asyncio.run(machine_access_token(local_dir, args.client, args.perm, [args.service]))
    except (OSError, KeyError, RuntimeError, httpx.HTTPError) as exc:
        print(f"devtoken: {type(exc).__name__}: is the stack up (make up)?", file=sys.stderr)
        return 1
    print(token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
