"""Mint a local development JWT: `python -m yovision_platform.tools.devtoken --key-file F --audience A
--sub alice [--perm signal:read ...] [--ttl 3600] [--issuer yovision-dev]`. Prints only the token."""

from __future__ import annotations

import argparse
import sys

from yovision_platform.auth import JWT_MAX_TTL_SECONDS, TokenVerifier
from yovision_platform.errors import ConfigError

DEV_ISSUER = "yovision-dev"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="devtoken", description="mint a local development bearer token")
    parser.add_argument("--key-file", required=True, help="hex key file (>= 32 bytes), as the service uses")
    parser.add_argument("--audience", required=True, help="the service's audience, e.g. signal-watcher")
    parser.add_argument("--issuer", default=DEV_ISSUER)
    parser.add_argument("--sub", required=True, help="user id")
    parser.add_argument(
        "--perm", action="append", default=[], help="permission, repeatable (e.g. signal:read)"
    )
    parser.add_argument("--ttl", type=int, default=3600, help=f"seconds, 1..{JWT_MAX_TTL_SECONDS}")
    args = parser.parse_args(argv)
    try:
        verifier = TokenVerifier.from_key_file(
            args.key_file, "--key-file", issuer=args.issuer, audience=args.audience
        )
        print(verifier.mint(args.sub, args.perm, ttl_seconds=args.ttl))
    except (ConfigError, ValueError) as exc:
        print(f"devtoken: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
