"""TokenLab end to end: every API of the running services takes only access tokens its issuer (the
environment's own ORY Hydra) signed for it, and answers every other credential with one and the same 401,
before any work. Tokens are made as an attacker would make them: from a real token's claims, with the
issuer's public JWKS, a key of the attacker's own, or a key the test imports into Hydra's key set (so the
signature verifies and only the claim under test is wrong). Key rotation needs no restart anywhere, and a
JWKS endpoint that is down stops no request whose key is cached.

The services run with `<P>AUTH_JWKS_REFRESH_SECONDS=10` (E2E_SETTINGS): a key the issuer removed stops
verifying within 10 s rather than the default 300 s.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import hashlib
import hmac
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from fastapi import FastAPI, Response
from jwt.algorithms import RSAAlgorithm

from tests.support.e2e_fixtures import (
    SENSE_PERMISSIONS,
    Witness,
    client,
    device_body,
    eventually,
    user_token,
)
from tests.support.served_app import serve_app
from yovision_platform.tools import hydra
from yovision_platform.tools.devtoken import machine_access_token, user_tokens
from yovision_platform.tools.environment import LocalEnvironment
from yovision_platform.tools.hydra import HydraAdmin
from yovision_platform.tools.identity_provider import DEV_TOKEN_CLIENT, IdentityProvider
from yovision_platform.web import AUDIENCES

PROVIDER_SCRIPT_SECONDS = 120.0
ROTATION_SECONDS = 40.0  # the services' JWKS refresh (10 s) and unknown-kid refetch interval (10 s), twice


@dataclass(frozen=True)
class Probe:
    """One request a service answers only for a caller with `permission`."""

    service: str
    method: str
    path: str
    permission: str
    body: Callable[[], dict[str, Any]] | None = None


ATTACK_TENANT = f"tenant-attacks-{uuid.uuid4().hex[:6]}"
PROBES = (
    Probe(
        "sense-reconciler",
        "POST",
        "/v1/devices",
        "sense:operate",
        lambda: device_body(ATTACK_TENANT, "s1", f"s1/cam-{uuid.uuid4().hex[:6]}", "rtsp://127.0.0.1:554/a"),
    ),
    Probe("orphan-scanner", "GET", "/v1/reports", "orphan:read"),
    Probe("bell-receiver", "GET", "/v1/audit-events", "bell:audit-read"),
    Probe("signal-watcher", "GET", "/v1/admin/signal-watchers", "signal:read"),
    Probe("media-worker", "GET", "/internal/instances", "media:drain"),
)
SUBJECT = "e2e-identity"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def compact(header: Mapping[str, Any], claims: Mapping[str, Any], sign: Callable[[bytes], bytes]) -> str:
    """A JWS compact serialization, signed by `sign` over exactly its signing input."""
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    return f"{signing_input}.{b64url(sign(signing_input.encode()))}"


def new_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def signed(key: rsa.RSAPrivateKey, claims: Mapping[str, Any], **header: Any) -> str:
    return jwt.encode(dict(claims), key, algorithm="RS256", headers={"typ": "JWT", **header})


@dataclass
class TokenLab:
    env: LocalEnvironment
    witness: Witness
    admin: HydraAdmin
    provider: IdentityProvider

    async def token(self, service: str, *permissions: str) -> str:
        token = await user_token(self.env, service, SUBJECT, *permissions)
        self.witness.secrets.add(token)
        return token

    async def call(self, probe: Probe, token: str | None, **headers: str) -> httpx.Response:
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        async with client(self.env.url(probe.service), self.witness, headers) as http:
            body = probe.body() if probe.body else None
            return await http.request(probe.method, probe.path, json=body)

    async def public_keys(self) -> dict[str, dict[str, Any]]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            response = await http.get(f"{self.provider.instance.issuer}/.well-known/jwks.json")
        return {key["kid"]: key for key in response.json()["keys"]}

    async def provider_script(self, action: str) -> None:
        """`identity_provider up|down` of the environment, as `services.sh` runs it."""
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "yovision_platform.tools.identity_provider",
            action,
            str(self.env.root),
            env=self.env.script_env(),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(process.communicate(), PROVIDER_SCRIPT_SECONDS)
        assert process.returncode == 0, err.decode(errors="replace")

    async def refusals(self, service: str, reason: str) -> float:
        async with httpx.AsyncClient(timeout=10.0) as http:
            page = (await http.get(f"{self.env.url(service)}/metrics")).text
        line = f'access_token_refusals_total{{reason="{reason}"}} '
        return sum(float(row.removeprefix(line)) for row in page.splitlines() if row.startswith(line))


@pytest.fixture
async def lab(env: LocalEnvironment, witness: Witness) -> AsyncIterator[TokenLab]:
    provider = IdentityProvider.load(env.root, AUDIENCES)
    async with httpx.AsyncClient(timeout=10.0) as http:
        yield TokenLab(env, witness, HydraAdmin(provider.instance.admin_url, http), provider)


async def no_attack_device(lab: TokenLab) -> bool:
    sense = await lab.token("sense-reconciler", *SENSE_PERMISSIONS)
    async with client(lab.env.url("sense-reconciler"), lab.witness) as http:
        response = await http.get(
            "/v1/devices", params={"tenant_id": ATTACK_TENANT}, headers={"Authorization": f"Bearer {sense}"}
        )
    assert response.status_code == 200, response.text
    return response.json()["items"] == []


async def assert_refused_alike(lab: TokenLab, probe: Probe, forged: Mapping[str, str]) -> None:
    """Each forged token answers exactly what no token answers: one 401, one body, one challenge."""
    baseline = await lab.call(probe, None)
    assert baseline.status_code == 401
    for name, token in forged.items():
        response = await lab.call(probe, token)
        assert (response.status_code, response.content) == (401, baseline.content), (probe.service, name)
        assert response.headers["www-authenticate"] == baseline.headers["www-authenticate"], name


async def test_a_valid_token_is_taken_and_one_lacking_the_permission_is_403_naming_it(
    lab: TokenLab,
) -> None:
    for probe in PROBES:
        if probe.service != "sense-reconciler":  # Sense's write is proven by every device flow
            granted = await lab.call(probe, await lab.token(probe.service, probe.permission))
            assert granted.status_code == 200, (probe.service, granted.text)
        lacking = await lab.call(probe, await lab.token(probe.service))
        assert lacking.status_code == 403, (probe.service, lacking.text)
        problem = lacking.json()
        assert problem["code"] == "forbidden" and probe.permission in problem["detail"], problem
    assert await no_attack_device(lab)


def self_signed_certificate(key: rsa.RSAPrivateKey) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "attacker.example.org")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM)


@contextlib.asynccontextmanager
async def attacker_site(key: rsa.RSAPrivateKey, kid: str) -> AsyncIterator[str]:
    """A loopback server of the attacker's, serving its own key as a JWKS (under the issuer's `kid`) and as
    an X.509 certificate: a verifier that followed `jku` or `x5u` would find a key that verifies."""
    app = FastAPI()
    jwk = {**json.loads(RSAAlgorithm.to_jwk(key.public_key())), "kid": kid, "alg": "RS256", "use": "sig"}
    certificate = self_signed_certificate(key)

    @app.get("/jwks.json")
    def jwks() -> dict[str, Any]:
        return {"keys": [jwk]}

    @app.get("/cert.pem")
    def cert() -> Response:
        return Response(certificate, media_type="application/x-pem-file")

    async with serve_app(app) as port:
        yield f"http://127.0.0.1:{port}"


async def test_tokens_forged_from_the_header_side_are_refused_alike_and_change_nothing(
    lab: TokenLab,
) -> None:
    attacker = new_rsa_key()
    attacker_jwk = json.loads(RSAAlgorithm.to_jwk(attacker.public_key()))
    kid = jwt.get_unverified_header(await lab.token(PROBES[1].service, PROBES[1].permission))["kid"]
    public = RSAAlgorithm.from_jwk(json.dumps((await lab.public_keys())[kid]))
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    async with attacker_site(attacker, kid) as site:
        for probe in PROBES:
            real = await lab.token(probe.service, probe.permission)
            assert jwt.get_unverified_header(real)["kid"] == kid
            claims = jwt.decode(real, options={"verify_signature": False})
            forged = {
                "alg none": compact({"alg": "none", "kid": kid, "typ": "JWT"}, claims, lambda _: b""),
                "HS256 keyed with the public key": compact(
                    {"alg": "HS256", "kid": kid, "typ": "JWT"},
                    claims,
                    lambda data, secret=pem: hmac.new(secret, data, hashlib.sha256).digest(),
                ),
                "jku to the attacker's JWKS": signed(attacker, claims, kid=kid, jku=f"{site}/jwks.json"),
                "x5u to the attacker's certificate": signed(
                    attacker, claims, kid=kid, x5u=f"{site}/cert.pem"
                ),
                "jwk in the header": signed(attacker, claims, kid=kid, jwk=attacker_jwk),
                "unknown kid": signed(attacker, claims, kid=f"unknown-{uuid.uuid4().hex}"),
                "another key, the same kid": signed(attacker, claims, kid=kid),
                "a valid token, tampered": real.rsplit(".", 1)[0][:-2] + "AA." + real.rsplit(".", 1)[1],
            }
            await assert_refused_alike(lab, probe, forged)
    assert await no_attack_device(lab)


async def test_signed_by_the_issuers_key_but_with_a_wrong_claim_is_refused_alike(lab: TokenLab) -> None:
    """The test imports a key pair of its own into Hydra's key set, so its signatures verify: only the
    claim under test is wrong. A token with every claim right is taken, proving that."""
    key = new_rsa_key()
    kid = f"e2e-claims-{uuid.uuid4().hex[:8]}"
    private_jwk = {**json.loads(RSAAlgorithm.to_jwk(key)), "kid": kid, "alg": "RS256", "use": "sig"}
    await lab.admin.import_signing_key(private_jwk)
    try:
        for probe in PROBES:
            now = int(time.time())
            right = {
                "iss": lab.provider.instance.issuer,
                "aud": [probe.service],
                "sub": SUBJECT,
                "client_id": DEV_TOKEN_CLIENT,
                "scp": [probe.permission],
                "iat": now,
                "nbf": now,
                "exp": now + 600,
                "jti": str(uuid.uuid4()),
            }
            if probe.service != "sense-reconciler":

                async def taken(token: str = signed(key, right, kid=kid), p: Probe = probe) -> bool:
                    return (await lab.call(p, token)).status_code == 200

                what = f"{probe.service} takes the imported key"
                await eventually(taken, within=ROTATION_SECONDS, what=what)
            other = next(a for a in AUDIENCES if a != probe.service)
            wrong = {
                "another issuer": {**right, "iss": "http://127.0.0.1:9"},
                "another service's audience": {**right, "aud": [other]},
                "expired": {**right, "iat": now - 1200, "nbf": now - 1200, "exp": now - 600},
                "not yet valid": {**right, "nbf": now + 600},
                "issued in the future": {**right, "iat": now + 600, "exp": now + 1200},
                "no subject": {k: v for k, v in right.items() if k != "sub"},
            }
            forged = {name: signed(key, claims, kid=kid) for name, claims in wrong.items()}
            await assert_refused_alike(lab, probe, forged)
    finally:
        await lab.admin.remove_signing_key(kid)
    assert await no_attack_device(lab)


async def test_a_forged_x_actor_is_refused_and_changes_nothing(lab: TokenLab) -> None:
    sense = PROBES[0]
    token = await lab.token(sense.service, *SENSE_PERMISSIONS)
    baseline = await lab.call(sense, None)
    forged = await lab.call(sense, token, **{"X-Actor": "someone-else"})
    assert (forged.status_code, forged.content) == (401, baseline.content)
    assert await no_attack_device(lab)


async def test_a_machine_clients_change_is_audited_under_its_client_id(lab: TokenLab) -> None:
    """`client_credentials`: the machine acts as itself, and Bell's trail names the client, whatever the
    request said."""
    token = await machine_access_token(lab.env.root, "operator-cli", SENSE_PERMISSIONS, ["sense-reconciler"])
    lab.witness.secrets.add(token)
    tenant, site = f"tenant-machine-{uuid.uuid4().hex[:6]}", "s1"
    body = device_body(tenant, site, f"{site}/cam-1", "rtsp://127.0.0.1:554/machine")
    async with client(lab.env.url("sense-reconciler"), lab.witness) as http:
        created = await http.post("/v1/devices", json=body, headers={"Authorization": f"Bearer {token}"})
    assert created.status_code == 201, created.text
    device_id = created.json()["id"]
    auditor = await lab.token("bell-receiver", "bell:audit-read")

    async def audited() -> list[dict[str, Any]] | None:
        async with client(lab.env.url("bell-receiver"), lab.witness) as http:
            response = await http.get(
                "/v1/audit-events",
                params={"source_system": "sense", "device_id": device_id},
                headers={"Authorization": f"Bearer {auditor}"},
            )
        items: list[dict[str, Any]] = response.json()["items"]
        return items or None

    [row] = await eventually(audited, what="the machine's change in Bell's trail")
    assert (row["action"], row["actor"]) == ("device.created", "operator-cli")


async def test_a_revoked_refresh_token_gets_nothing(lab: TokenLab) -> None:
    """Revoked, a refresh token gets no new token at the issuer; presented as a bearer token (it is no
    access token at all), every service refuses it as it refuses any other."""
    tokens = await user_tokens(lab.env.root, SUBJECT, ["signal:read"], ["signal-watcher"])
    assert tokens.refresh_token is not None
    lab.witness.secrets |= {tokens.access_token, tokens.refresh_token}
    issuer, secret = lab.provider.instance.issuer, lab.provider.secret(DEV_TOKEN_CLIENT)
    refreshed = await hydra.refreshed_tokens(issuer, DEV_TOKEN_CLIENT, secret, tokens.refresh_token)
    assert refreshed.refresh_token is not None
    lab.witness.secrets |= {refreshed.access_token, refreshed.refresh_token}
    await hydra.revoke_token(issuer, DEV_TOKEN_CLIENT, secret, refreshed.refresh_token)
    with pytest.raises(RuntimeError):
        await hydra.refreshed_tokens(issuer, DEV_TOKEN_CLIENT, secret, refreshed.refresh_token)
    for probe in PROBES:
        await assert_refused_alike(lab, probe, {"revoked refresh token": refreshed.refresh_token})


async def test_a_rotated_signing_key_is_taken_without_a_restart_and_a_removed_one_refused(
    lab: TokenLab,
) -> None:
    probe = PROBES[3]  # signal-watcher's admin list: a read, repeatable
    before = await lab.token(probe.service, probe.permission)
    assert (await lab.call(probe, before)).status_code == 200
    old_kid = jwt.get_unverified_header(before)["kid"]
    pids = {service: lab.env.pid(service) for service in AUDIENCES}
    new_kid = f"access-{uuid.uuid4().hex[:8]}"
    await lab.admin.add_signing_key(new_kid)
    after = await lab.token(probe.service, probe.permission)
    assert jwt.get_unverified_header(after)["kid"] == new_kid

    async def taken() -> bool:
        return (await lab.call(probe, after)).status_code == 200

    await eventually(taken, within=ROTATION_SECONDS, what="a token of the new key taken")
    assert (await lab.call(probe, before)).status_code == 200, "the old key still verifies"
    await lab.admin.remove_signing_key(old_kid)

    async def old_refused() -> bool:
        return (await lab.call(probe, before)).status_code == 401

    await eventually(old_refused, within=ROTATION_SECONDS, what="a token of the removed key refused")
    assert (await lab.call(probe, after)).status_code == 200
    assert {service: lab.env.pid(service) for service in AUDIENCES} == pids, "nothing restarted"


async def test_a_jwks_endpoint_down_stops_no_cached_key_and_an_unknown_kid_is_401(lab: TokenLab) -> None:
    probe = PROBES[1]  # orphan-scanner's reports: a read
    token = await lab.token(probe.service, probe.permission)
    assert (await lab.call(probe, token)).status_code == 200  # its key is cached now
    unknown = signed(new_rsa_key(), jwt.decode(token, options={"verify_signature": False}), kid="gone-away")
    counted = await lab.refusals(probe.service, "unknown_kid")
    await lab.provider_script("down")
    try:
        assert (await lab.call(probe, token)).status_code == 200
        refused = await lab.call(probe, unknown)
        assert refused.status_code == 401, refused.text
        assert await lab.refusals(probe.service, "unknown_kid") == counted + 1
        log = lab.env.log_file(probe.service).read_text(encoding="utf-8", errors="replace")
        assert "access_token_unknown_kid" in log
    finally:
        await lab.provider_script("up")
