"""The access-token verifier and the JWKS key cache, on keys made here and a JWKS served in process (the
same verifier against the real Hydra: tests/integration/platform/test_hydra_tokens.py)."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from tests.support.issuers import LocalIssuer
from yovision_platform.web import (
    AccessTokenCaller,
    AccessTokenVerifier,
    AuthError,
    PermissionMapping,
    Refusal,
    create_app,
)
from yovision_platform.web._jwks import FetchOutcome, IssuerKeys, parse_jwks

ISSUER = "http://127.0.0.1:4444"
AUDIENCE = "signal-watcher"
JWKS_URL = f"{ISSUER}/.well-known/jwks.json"


@dataclass
class SigningKeyPair:
    kid: str
    algorithm: str
    private: Any

    def public_jwk(self) -> dict[str, Any]:
        tool = RSAAlgorithm if self.algorithm.startswith("RS") else ECAlgorithm
        jwk: dict[str, Any] = json.loads(tool.to_jwk(self.private.public_key()))
        return {**jwk, "kid": self.kid, "alg": self.algorithm, "use": "sig"}

    def sign(self, claims: Mapping[str, Any], **header: Any) -> str:
        return jwt.encode(
            dict(claims), self.private, algorithm=self.algorithm, headers={"kid": self.kid, **header}
        )


@functools.cache
def _rsa_private(name: str) -> rsa.RSAPrivateKey:
    """One 2048-bit key per name for the whole module: making one costs about 0.1 s."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def rsa_key(kid: str, private: str | None = None) -> SigningKeyPair:
    """The key `kid`; `private` names another private key (a forger's) under the same `kid`."""
    return SigningKeyPair(kid, "RS256", _rsa_private(private or kid))


def ec_key(kid: str) -> SigningKeyPair:
    return SigningKeyPair(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))


@dataclass
class Jwks:
    """An issuer's JWKS endpoint, served in process: its keys can change and it can be down."""

    keys: list[SigningKeyPair]
    down: bool = False
    fetches: int = 0
    extra: list[dict[str, Any]] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        assert str(request.url) == JWKS_URL
        self.fetches += 1
        if self.down:
            return httpx.Response(503)
        return httpx.Response(200, json={"keys": [k.public_jwk() for k in self.keys] + self.extra})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {
        "iss": ISSUER,
        "aud": [AUDIENCE],
        "sub": "alice",
        "iat": now,
        "exp": now + 600,
        "scp": ["signal:read"],
    }
    return {**base, **changes}


@pytest.fixture
def key() -> SigningKeyPair:
    return rsa_key("k1")


@pytest.fixture
def jwks(key: SigningKeyPair) -> Jwks:
    return Jwks([key])


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def keys(jwks: Jwks, clock: Clock) -> AsyncIterator[IssuerKeys]:
    async with httpx.AsyncClient(transport=httpx.MockTransport(jwks.handler)) as http:
        issuer_keys = IssuerKeys(
            JWKS_URL, frozenset({"RS256", "ES256"}), http, refresh_seconds=300, clock=clock
        )
        yield issuer_keys
        await issuer_keys.aclose()


@pytest.fixture
def refusals() -> list[Refusal]:
    return []


@pytest.fixture
def verifier(keys: IssuerKeys, refusals: list[Refusal]) -> AccessTokenVerifier:
    return AccessTokenVerifier(keys, ISSUER, AUDIENCE, on_refusal=refusals.append)


async def test_a_token_signed_by_the_issuer_verifies_to_its_subject_and_scopes(
    verifier: AccessTokenVerifier, key: SigningKeyPair
) -> None:
    identity = await verifier.verify(key.sign(claims(scp=["signal:read", "openid", "offline_access"])))
    assert identity.subject == "alice" and identity.permissions == frozenset({"signal:read"})


async def test_an_es256_key_verifies_its_own_tokens(keys: IssuerKeys, jwks: Jwks) -> None:
    es = ec_key("e1")
    jwks.keys.append(es)
    verifier = AccessTokenVerifier(keys, ISSUER, AUDIENCE)
    assert (await verifier.verify(es.sign(claims()))).subject == "alice"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(claims_: Mapping[str, Any], kid: str) -> str:
    header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": kid}).encode())
    return f"{header}.{_b64(json.dumps(dict(claims_)).encode())}."


def hs256_with_the_public_key(key: SigningKeyPair) -> str:
    """Algorithm confusion: the issuer's public key (PEM) as an HMAC secret, signed by hand (PyJWT itself
    refuses to use a PEM public key as an HMAC secret)."""
    import hashlib
    import hmac

    pem = key.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": key.kid}).encode())
    body = _b64(json.dumps(claims()).encode())
    signature = hmac.new(pem, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(signature)}"


def _with_header(token: str, **changes: Any) -> str:
    """The token with header fields replaced (its signature no longer matches, which must not matter:
    the header is refused before any key is looked up)."""
    head, body, signature = token.split(".")
    header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    return ".".join((_b64(json.dumps({**header, **changes}).encode()), body, signature))


ATTACKS: dict[str, Callable[[SigningKeyPair], str]] = {
    "alg none": lambda key: unsigned(claims(), key.kid),
    "hs256 with the public key": hs256_with_the_public_key,
    "jku elsewhere": lambda key: key.sign(claims(), jku="http://127.0.0.1:9/jwks.json"),
    "x5u elsewhere": lambda key: key.sign(claims(), x5u="http://127.0.0.1:9/cert.pem"),
    "jwk in the header": lambda key: key.sign(claims(), jwk=key.public_jwk()),
    "unknown kid": lambda key: SigningKeyPair("k9", "RS256", key.private).sign(claims()),
    "no kid": lambda key: jwt.encode(claims(), key.private, algorithm="RS256"),
    "wrong iss": lambda key: key.sign(claims(iss="http://127.0.0.1:9")),
    "another audience": lambda key: key.sign(claims(aud=["bell-receiver"])),
    "no audience": lambda key: key.sign({k: v for k, v in claims().items() if k != "aud"}),
    "expired": lambda key: key.sign(claims(iat=int(time.time()) - 700, exp=int(time.time()) - 60)),
    "not yet valid": lambda key: key.sign(claims(nbf=int(time.time()) + 60)),
    "iat in the future": lambda key: key.sign(claims(iat=int(time.time()) + 60, exp=int(time.time()) + 600)),
    "another key with the same kid": lambda key: rsa_key(key.kid, private="forger").sign(claims()),
    "an ES256 header on an RSA key": lambda key: ec_key(key.kid).sign(claims()),
    "not a JWT": lambda key: "not-a-token",
    "an algorithm that is not a string": lambda key: _with_header(key.sign(claims()), alg=["RS256"]),
    "a kid that is not a string": lambda key: _with_header(key.sign(claims()), kid={"k": key.kid}),
    "bad subject": lambda key: key.sign(claims(sub="two words")),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_every_forged_or_foreign_token_is_the_same_refusal(
    verifier: AccessTokenVerifier, key: SigningKeyPair, attack: str
) -> None:
    token = ATTACKS[attack](key)
    with pytest.raises(AuthError) as refused:
        await verifier.verify(token)
    assert (refused.value.code, refused.value.status) == ("unauthorized", 401)


async def test_a_symmetric_or_private_key_in_the_set_is_never_used(key: SigningKeyPair) -> None:
    document = {
        "keys": [
            {"kty": "oct", "kid": "s1", "k": _b64(b"x" * 32), "alg": "HS256"},
            {**key.public_jwk(), "kid": "p1", "d": "private"},
            {**key.public_jwk(), "kid": "e1", "use": "enc"},
            {**key.public_jwk(), "kid": "k1"},
        ]
    }
    assert set(parse_jwks(document, frozenset({"RS256", "HS256"}))) == {"k1"}


def test_only_asymmetric_algorithms_can_be_allowed() -> None:
    with pytest.raises(ValueError, match="not asymmetric"):
        IssuerKeys(JWKS_URL, frozenset({"HS256"}), httpx.AsyncClient())


async def test_a_new_key_verifies_on_its_first_token_with_one_fetch(
    verifier: AccessTokenVerifier, jwks: Jwks, key: SigningKeyPair, clock: Clock
) -> None:
    await verifier.verify(key.sign(claims()))
    new = rsa_key("k2")
    jwks.keys.append(new)
    clock.now += 11  # past the unknown-kid interval
    assert (await verifier.verify(new.sign(claims()))).subject == "alice"
    assert jwks.fetches == 2
    for _ in range(50):
        await verifier.verify(new.sign(claims()))
        await verifier.verify(key.sign(claims()))
    assert jwks.fetches == 2  # steady state: no fetch per request


async def test_a_flood_of_unknown_kids_costs_one_fetch_per_interval(
    verifier: AccessTokenVerifier, jwks: Jwks, key: SigningKeyPair, refusals: list[Refusal]
) -> None:
    await verifier.verify(key.sign(claims()))
    for n in range(100):
        with pytest.raises(AuthError):
            await verifier.verify(SigningKeyPair(f"made-up-{n}", "RS256", key.private).sign(claims()))
    assert jwks.fetches == 1  # the first token's fetch was this interval's
    assert refusals == [Refusal.UNKNOWN_KID] * 100


async def test_concurrent_first_tokens_share_one_fetch(
    verifier: AccessTokenVerifier, jwks: Jwks, key: SigningKeyPair
) -> None:
    token = key.sign(claims())
    identities = await asyncio.gather(*(verifier.verify(token) for _ in range(20)))
    assert {i.subject for i in identities} == {"alice"} and jwks.fetches == 1


async def test_a_token_arriving_while_the_first_fetch_is_in_flight_waits_for_it(
    key: SigningKeyPair, clock: Clock
) -> None:
    """The first fetch has started (and counts as the attempt of this interval) when a second token of
    the same new `kid` arrives: it waits for that fetch, never refused as an unknown kid."""
    jwks = Jwks([key])
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        started.set()
        await release.wait()
        return jwks.handler(request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(slow)) as http:
        keys = IssuerKeys(JWKS_URL, frozenset({"RS256"}), http, clock=clock)
        verifier = AccessTokenVerifier(keys, ISSUER, AUDIENCE)
        token = key.sign(claims())
        first = asyncio.create_task(verifier.verify(token))
        await started.wait()
        second = asyncio.create_task(verifier.verify(token))
        await asyncio.sleep(0)  # the second request reaches the key cache while the fetch is in flight
        release.set()
        identities = await asyncio.gather(first, second)
        await keys.aclose()
    assert [i.subject for i in identities] == ["alice", "alice"] and jwks.fetches == 1


async def test_while_the_endpoint_is_down_cached_keys_verify_and_unknown_kids_are_refused(
    verifier: AccessTokenVerifier, keys: IssuerKeys, jwks: Jwks, key: SigningKeyPair, clock: Clock
) -> None:
    outcomes: list[FetchOutcome] = []
    keys.on_fetch = outcomes.append
    await verifier.verify(key.sign(claims()))
    jwks.down = True
    clock.now += 301  # the set is stale: a refresh starts, fails, and the cached key still verifies
    assert (await verifier.verify(key.sign(claims()))).subject == "alice"
    await keys.settled()
    clock.now += 11
    with pytest.raises(AuthError):
        await verifier.verify(rsa_key("k2").sign(claims()))
    assert (await verifier.verify(key.sign(claims()))).subject == "alice"
    assert outcomes[0] is FetchOutcome.FETCHED and FetchOutcome.FAILED in outcomes[1:]


async def test_a_key_removed_from_the_set_stops_verifying_after_the_refresh(
    verifier: AccessTokenVerifier, keys: IssuerKeys, jwks: Jwks, key: SigningKeyPair, clock: Clock
) -> None:
    old_token = key.sign(claims())
    await verifier.verify(old_token)
    jwks.keys = [rsa_key("k2")]
    clock.now += 301
    await verifier.verify(old_token)  # stale: answered from the cache, refreshed in the background
    await keys.settled()
    clock.now += 11
    with pytest.raises(AuthError):
        await verifier.verify(old_token)


@pytest.mark.parametrize(
    ("mapping", "token_claims", "expected"),
    [
        (PermissionMapping(), {"scp": ["sense:operate", "openid"]}, {"sense:operate"}),
        (PermissionMapping("scope"), {"scope": "openid sense:read"}, {"sense:read"}),
        (
            PermissionMapping(
                "realm_access.roles", {"camera-operator": frozenset({"sense:operate", "sense:read"})}
            ),
            {"realm_access": {"roles": ["camera-operator", "signal:read"]}},
            {"sense:operate", "sense:read"},
        ),
        (PermissionMapping("groups"), {"groups": "not-a-list-of-grants"}, set()),
        (PermissionMapping("roles"), {}, set()),
    ],
)
def test_permissions_come_from_the_configured_claim_and_mapping(
    mapping: PermissionMapping, token_claims: dict[str, Any], expected: set[str]
) -> None:
    assert mapping.permissions(token_claims) == expected


@pytest.mark.parametrize(
    ("claim", "grants"),
    [("", None), ("realm_access..roles", None), ("roles", {"admin": frozenset({"Not A Permission"})})],
)
def test_a_mapping_that_cannot_mean_anything_is_refused(
    claim: str, grants: dict[str, frozenset[str]] | None
) -> None:
    with pytest.raises(ValueError, match=r"claim names|look like"):
        PermissionMapping(claim, grants)


async def test_a_route_taking_the_caller_answers_a_valid_token_and_refuses_others_alike() -> None:
    issuer = LocalIssuer()
    app = create_app("demo-service", "1.0")

    @app.get("/v1/me")
    async def me(caller: AccessTokenCaller) -> dict[str, object]:
        return {"subject": caller.subject, "permissions": sorted(caller.permissions)}

    async with issuer.jwks_client() as jwks_http:
        keys = IssuerKeys(issuer.jwks_url, frozenset({"RS256"}), jwks_http)
        app.state.access_token_verifier = AccessTokenVerifier(keys, issuer.issuer, "signal-watcher")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://demo") as http:
            token = await issuer.user_token("alice", ["signal:read"], ["signal-watcher"])
            answer = await http.get("/v1/me", headers={"Authorization": f"Bearer {token}"})
            assert answer.json() == {"subject": "alice", "permissions": ["signal:read"]}
            foreign = await issuer.user_token("alice", ["signal:read"], ["bell-receiver"])
            refusals = [
                await http.get("/v1/me"),
                await http.get("/v1/me", headers={"Authorization": f"Bearer {foreign}"}),
                await http.get("/v1/me", headers={"Authorization": "Bearer not-a-token"}),
            ]
        await keys.aclose()
    assert {(r.status_code, r.headers.get("www-authenticate"), r.content) for r in refusals} == {
        (401, "Bearer", refusals[0].content)
    }
