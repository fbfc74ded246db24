"""`python -m bench.access_tokens`: the cost of verifying the OpenID provider's access tokens, side by side
with the HS256 check the services ran before (shared keys), on tokens of a real ORY Hydra (a private one,
`tools.hydra.private_hydra`).

In one process, interleaved so that both see the same machine:

- ``hs256``: the HS256 check the services ran before they took the provider's tokens (PyJWT's decode with
  the same claim checks, `hs256_check`): the baseline;
- ``access_token``: `access_tokens.AccessTokenVerifier.verify` of Hydra's RS256 access token, through the
  key cache, as a service's request would;
- ``rsa_floor``: the RSA-2048 signature check alone (`cryptography`), the physical limit of any RS256
  verifier on this machine.

Then the key cache's fetches: in steady state a process fetches the JWKS once per `kid`. After a key
rotation at Hydra, the first token of the new key costs one fetch and no other does. And the sign-in's share
at Hydra (authorization code with PKCE, the login and consent accepted through its admin API, the code
exchanged) as p50/p95.

Exits non-zero when a count is wrong (`bench_runner.BenchCounts`): a verification that failed, a fetch other
than one per `kid`, a sign-in that did not yield a token.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import secrets
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import jwt
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from bench.infra import ensure_stack
from bench.stats import Latency
from yovision_platform.tools import hydra, identity_provider
from yovision_platform.tools.bench_runner import BenchCounts, run_cleanly
from yovision_platform.web import (
    AUDIENCES,
    DECODE_OPTIONS,
    JWT_LEEWAY_SECONDS_DEFAULT,
    AccessTokenVerifier,
    AuthError,
    FetchOutcome,
    IssuerKeys,
    check_times,
    checked_subject,
)

AUDIENCE = "signal-watcher"
CLIENTS = identity_provider.clients(hydra.UNSERVED_CONSOLE_URL, AUDIENCES)  # the environment's own
USERS = next(c for c in CLIENTS if c.client_id == identity_provider.DEV_TOKEN_CLIENT)
DEFAULT_VERIFICATIONS = 20_000
DEFAULT_SIGN_INS = 200
JSON_PREFIX = "BENCH_JSON "


def hs256_token(key: bytes, issuer: str) -> str:
    now = int(time.time())
    claims = {
        "sub": "bench",
        "iss": issuer,
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + 900,
        "perm": ["signal:read"],
    }
    return jwt.encode(claims, key, algorithm="HS256")


def hs256_check(token: str, key: bytes, issuer: str) -> object:
    """The services' former check of their shared-key tokens, step for step: signature, `iss`, `aud`, the
    times with the leeway, the subject, the permissions."""
    claims = jwt.decode(
        token, key, algorithms=["HS256"], issuer=issuer, audience=AUDIENCE, options=DECODE_OPTIONS
    )
    check_times(claims, now=None, leeway_seconds=JWT_LEEWAY_SECONDS_DEFAULT)
    return checked_subject(claims), frozenset(claims.get("perm", []))


async def timed(calls: int, once: Callable[[], Awaitable[object]], samples: list[float]) -> None:
    for _ in range(calls):
        start = time.perf_counter()
        await once()
        samples.append(time.perf_counter() - start)


def rsa_floor(token: str, key: object) -> Callable[[], Awaitable[object]]:
    head, body, signature = token.split(".")
    raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    message = f"{head}.{body}".encode()

    async def once() -> None:
        key.verify(raw, message, padding.PKCS1v15(), hashes.SHA256())  # type: ignore[attr-defined]

    return once


async def run(verifications: int, sign_ins: int) -> tuple[dict[str, object], BenchCounts]:
    stack = ensure_stack()
    work_dir = Path(tempfile.mkdtemp(prefix="bench-hydra-"))
    async with hydra.private_hydra(stack.admin_dsn, work_dir, CLIENTS) as private:
        issuer = private.instance.issuer
        secret = private.client_secrets
        token = await hydra.machine_token(
            issuer, "bench", secret["bench"], scopes=["signal:read"], audiences=[AUDIENCE]
        )
        fetches: list[FetchOutcome] = []
        async with httpx.AsyncClient() as http:
            keys = IssuerKeys(
                f"{issuer}/.well-known/jwks.json", frozenset({"RS256"}), http, on_fetch=fetches.append
            )
            verifier = AccessTokenVerifier(keys, issuer, AUDIENCE)
            hs_key = secrets.token_bytes(32)
            hs_token = hs256_token(hs_key, issuer)
            await verifier.verify(token)  # the one fetch of this kid, before timing
            kid = jwt.get_unverified_header(token)["kid"]
            key = await keys.key(kid)
            assert key is not None

            async def hs256() -> object:
                return hs256_check(hs_token, hs_key, issuer)

            samples: dict[str, list[float]] = {"hs256": [], "access_token": [], "rsa_floor": []}
            checks = {
                "hs256": hs256,
                "access_token": lambda: verifier.verify(token),
                "rsa_floor": rsa_floor(token, key.key),
            }
            rounds = 20
            for _ in range(rounds):  # interleaved: the machine's noise falls on all three alike
                for name, once in checks.items():
                    await timed(verifications // rounds, once, samples[name])
            steady_fetches = len(fetches)

            await private.admin.add_signing_key(f"bench-rotated-{secrets.token_hex(3)}")
            rotated = await hydra.machine_token(
                issuer, "bench", secret["bench"], scopes=["signal:read"], audiences=[AUDIENCE]
            )
            deadline = time.monotonic() + 30
            while True:  # the unknown-kid interval since the last fetch may have to pass first
                try:
                    await verifier.verify(rotated)
                    break
                except AuthError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.5)
            for _ in range(1000):
                await verifier.verify(rotated)
                await verifier.verify(token)
            rotated_fetches = len(fetches) - steady_fetches
            await keys.aclose()

        sign_in: list[float] = []
        signed_in = 0
        for _ in range(sign_ins):
            start = time.perf_counter()
            tokens = await hydra.signed_in_tokens(
                issuer,
                private.admin,
                USERS,
                secret["dev-token"],
                subject="bench-user",
                permissions=["signal:read"],
                audiences=[AUDIENCE],
            )
            sign_in.append(time.perf_counter() - start)
            signed_in += bool(tokens.access_token)

    latency = {name: Latency.of_seconds(values) for name, values in samples.items()}
    result: dict[str, object] = {
        "verifications": {name: lat.as_dict() for name, lat in latency.items()},
        "overhead_p99_ms": round(latency["access_token"].p99_ms - latency["hs256"].p99_ms, 3),
        "ratio_p50_vs_hs256": round(latency["access_token"].p50_ms / latency["hs256"].p50_ms, 2),
        "ratio_p50_vs_rsa_floor": round(latency["access_token"].p50_ms / latency["rsa_floor"].p50_ms, 2),
        "jwks_fetches_steady": steady_fetches,
        "jwks_fetches_after_rotation": rotated_fetches,
        "sign_in": Latency.of_seconds(sign_in).as_dict(),
        "signed_in": signed_in,
    }
    counts = BenchCounts()
    for name, lat in latency.items():
        counts.expect(f"{name}: verifications", lat.count, (verifications // rounds) * rounds)
    counts.expect("JWKS fetches in steady state (one per kid)", steady_fetches, 1)
    counts.expect("JWKS fetches after a rotation (one per kid)", rotated_fetches, 1)
    counts.expect("JWKS fetches that failed", sum(f is not FetchOutcome.FETCHED for f in fetches), 0)
    counts.expect("sign-ins that yielded a token", signed_in, sign_ins)
    result["wrong_counts"] = counts.short
    return result, counts


def table(result: dict[str, object]) -> str:
    rows = result["verifications"]
    sign_in = result["sign_in"]
    assert isinstance(rows, dict)
    assert isinstance(sign_in, dict)
    lines = ["check          p50 ms   p95 ms   p99 ms   max ms"]
    for name, lat in rows.items():
        figures = "  ".join(f"{lat[k]:>7.3f}" for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms"))
        lines.append(f"{name:<13} {figures}")
    lines += [
        f"access token over HS256: p99 +{result['overhead_p99_ms']} ms (goal <= 1 ms);"
        f" p50 x{result['ratio_p50_vs_hs256']} of HS256,"
        f" x{result['ratio_p50_vs_rsa_floor']} of the RSA floor",
        f"JWKS fetches: {result['jwks_fetches_steady']} in steady state,"
        f" {result['jwks_fetches_after_rotation']} after a rotation (goal: one per kid)",
        f"sign-in at Hydra: p50 {sign_in['p50_ms']:.1f} ms, p95 {sign_in['p95_ms']:.1f} ms"
        f" over {sign_in['count']} (the console's own share is not in it)",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.access_tokens", description=__doc__.splitlines()[0])
    parser.add_argument("--verifications", type=int, default=DEFAULT_VERIFICATIONS)
    parser.add_argument("--sign-ins", type=int, default=DEFAULT_SIGN_INS)
    args = parser.parse_args()
    result, counts = run_cleanly(run(args.verifications, args.sign_ins))
    print(table(result))
    print(JSON_PREFIX + json.dumps({"bench": "access_tokens", **result}))
    counts.exit_if_short("bench.access_tokens")


if __name__ == "__main__":
    main()
