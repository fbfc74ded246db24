"""OpenID providers for tests: the real ORY Hydra, and `LocalIssuer`, an in-process stand-in that signs
tokens shaped as Hydra's and serves its JWKS through an `httpx.MockTransport` (for unit tests of the
services' APIs, which run without servers). `tests/ports/platform/test_issuers.py` runs one contract suite
against both, so what a unit test learns from `LocalIssuer` holds for Hydra."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from yovision_platform.tools import hydra, identity_provider
from yovision_platform.tools.hydra import ClientSpec, HydraAdmin
from yovision_platform.web import AUDIENCES, AccessTokenVerifier, IssuerKeys, PermissionMapping

ACCESS_TOKEN_TTL_SECONDS = 15 * 60


class Issuer(Protocol):
    """What the tests need of an OpenID provider."""

    @property
    def issuer(self) -> str: ...

    @property
    def jwks_url(self) -> str: ...

    def jwks_client(self) -> httpx.AsyncClient:
        """A client that reaches the JWKS (the caller closes it)."""
        ...

    async def user_token(self, subject: str, permissions: Sequence[str], audiences: Sequence[str]) -> str: ...

    async def machine_token(
        self, client_id: str, permissions: Sequence[str], audiences: Sequence[str]
    ) -> str:
        """A `client_credentials` token of `client_id` (which the issuer knows)."""
        ...

    async def key_ids(self) -> list[str]: ...

    async def rotate(self, kid: str) -> None:
        """A new signing key: tokens are signed with it from now on."""
        ...

    async def retire(self, kid: str) -> None:
        """The key leaves the JWKS."""
        ...


@dataclass
class _Key:
    kid: str
    private: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )

    def public_jwk(self) -> dict[str, Any]:
        jwk: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        return {**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}


@dataclass
class LocalIssuer:
    """Signs RS256 access tokens with the claims Hydra's have (`iss`, `aud` list, `sub`, `client_id`, `scp`
    list, `iat`, `nbf`, `exp`, `jti`, `ext`); its JWKS answers through `jwks_client()`."""

    issuer: str = "http://127.0.0.1:14444"
    clients: frozenset[str] = frozenset(identity_provider.MACHINE_CLIENTS)
    _keys: list[_Key] = field(default_factory=lambda: [_Key(str(uuid.uuid4()))])
    jwks_fetches: int = 0

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/.well-known/jwks.json"

    def _jwks(self, request: httpx.Request) -> httpx.Response:
        if str(request.url) != self.jwks_url:
            return httpx.Response(404)
        self.jwks_fetches += 1
        return httpx.Response(200, json={"keys": [key.public_jwk() for key in self._keys]})

    def jwks_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self._jwks))

    def verifier(self, audience: str, mapping: PermissionMapping | None = None) -> AccessTokenVerifier:
        """A verifier of this issuer's tokens for `audience`, its JWKS reached in process (unit tests of a
        service's API: `use_access_token_verifier(app, issuer.verifier("signal-watcher"))`)."""
        keys = IssuerKeys(self.jwks_url, frozenset({"RS256"}), self.jwks_client())
        return AccessTokenVerifier(keys, self.issuer, audience, mapping or PermissionMapping())

    def token(self, subject: str, *permissions: str, audience: str) -> str:
        """A user's access token for one audience, signed at once (no await: for synchronous tests)."""
        return self.sign(subject, "dev-token", ["openid", "offline_access", *permissions], [audience])

    def sign(self, subject: str, client_id: str, permissions: Sequence[str], audiences: Sequence[str]) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": list(audiences),
            "sub": subject,
            "client_id": client_id,
            "scp": list(permissions),
            "iat": now,
            "nbf": now,
            "exp": now + ACCESS_TOKEN_TTL_SECONDS,
            "jti": str(uuid.uuid4()),
            "ext": {},
        }
        key = self._keys[-1]
        return jwt.encode(claims, key.private, algorithm="RS256", headers={"kid": key.kid, "typ": "JWT"})

    async def user_token(self, subject: str, permissions: Sequence[str], audiences: Sequence[str]) -> str:
        return self.sign(subject, "dev-token", ["openid", "offline_access", *permissions], audiences)

    async def machine_token(
        self, client_id: str, permissions: Sequence[str], audiences: Sequence[str]
    ) -> str:
        if client_id not in self.clients:
            raise RuntimeError("unknown client")
        return self.sign(client_id, client_id, permissions, audiences)

    async def key_ids(self) -> list[str]:
        return [key.kid for key in self._keys]

    async def rotate(self, kid: str) -> None:
        self._keys.append(_Key(kid))

    async def retire(self, kid: str) -> None:
        self._keys = [key for key in self._keys if key.kid != kid]


@dataclass
class HydraIssuer:
    """The real ORY Hydra of a test (`hydra.hydra_environment`), with its clients registered."""

    issuer: str
    admin: HydraAdmin
    users: ClientSpec
    secrets: dict[str, str]

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/.well-known/jwks.json"

    def jwks_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=10.0)

    async def user_token(self, subject: str, permissions: Sequence[str], audiences: Sequence[str]) -> str:
        tokens = await hydra.signed_in_tokens(
            self.issuer,
            self.admin,
            self.users,
            self.secrets[self.users.client_id],
            subject=subject,
            permissions=permissions,
            audiences=audiences,
        )
        return tokens.access_token

    async def machine_token(
        self, client_id: str, permissions: Sequence[str], audiences: Sequence[str]
    ) -> str:
        secret = self.secrets.get(client_id, "not-a-client-of-this-issuer")  # Hydra refuses it
        return await hydra.machine_token(
            self.issuer, client_id, secret, scopes=permissions, audiences=audiences
        )

    async def key_ids(self) -> list[str]:
        return await self.admin.signing_key_ids()

    async def rotate(self, kid: str) -> None:
        await self.admin.add_signing_key(kid)

    async def retire(self, kid: str) -> None:
        await self.admin.remove_signing_key(kid)


# The environment's own clients (`identity_provider.clients`), as a private Hydra registers them.
CLIENTS = identity_provider.clients(hydra.UNSERVED_CONSOLE_URL, AUDIENCES)
USERS = next(c for c in CLIENTS if c.client_id == identity_provider.DEV_TOKEN_CLIENT)


@contextlib.asynccontextmanager
async def hydra_issuer(admin_dsn: str, work_dir: Path) -> AsyncIterator[HydraIssuer]:
    """A private Hydra (`hydra.private_hydra`) with the environment's clients."""
    async with hydra.private_hydra(admin_dsn, work_dir, CLIENTS) as private:
        yield HydraIssuer(private.instance.issuer, private.admin, USERS, dict(private.client_secrets))
