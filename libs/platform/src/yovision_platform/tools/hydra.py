"""ORY Hydra, the OpenID provider of an environment: its processes and its admin API.

Hydra (built by the set-up into ``.local/bin/hydra``, `infra/scripts/install-hydra.sh`) runs with the
configuration `infra/hydra/hydra.yml`, plus per instance:

- the ports, the issuer and the console's login, consent and logout pages, as environment variables;
- the DSN (a role owning its schema) and the system secret, in a second, 0600 configuration file: never on a
  command line, in an environment or in a log.

``--dev`` lets the issuer be plain HTTP on loopback; a production Hydra is served over TLS.

`HydraAdmin` is the small part of the admin API the stack uses: clients, the signing keys of access tokens,
and accepting a login and a consent (the console's login pages, `make dev-token`, the tests).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import asyncpg
import httpx

from yovision_platform.localstack import runtime_dsn
from yovision_platform.storage import Identifier, SchemaPlan, drop
from yovision_platform.tools.localhost import free_port, stop_process, write_private_file

__all__ = [
    "ACCESS_TOKEN_KEY_SET",
    "HYDRA_CONFIG",
    "ClientSpec",
    "HydraAdmin",
    "HydraAdminError",
    "HydraInstance",
    "PrivateHydra",
    "TokenSet",
    "create_database_role",
    "drop_database_role",
    "hydra_environment",
    "machine_token",
    "migrate",
    "private_hydra",
    "refreshed_tokens",
    "revoke_token",
    "signed_in_tokens",
    "start",
    "wait_ready",
    "wait_until_ready",
]

REPO_ROOT = Path(__file__).resolve().parents[5]
HYDRA_CONFIG = REPO_ROOT / "infra" / "hydra" / "hydra.yml"
HYDRA_BINARY = REPO_ROOT / ".local" / "bin" / "hydra"
# Hydra's key set for signing JWT access tokens (and the one its JWKS serves them from).
ACCESS_TOKEN_KEY_SET = "hydra.jwt.access-token"  # noqa: S105 (a key set's name)
READY_TIMEOUT_SECONDS = 60.0
KEY_MAKING_TIMEOUT_SECONDS = 30.0
MIGRATE_TIMEOUT_SECONDS = 120.0
POLL_SECONDS = 0.1
# The console of a private Hydra: nothing serves it, logins are accepted through the admin API.
UNSERVED_CONSOLE_URL = "http://127.0.0.1:9"


@dataclass(frozen=True)
class HydraInstance:
    """One Hydra: where it listens, whose login pages it sends users to, and its secrets."""

    public_port: int
    admin_port: int
    dsn: str
    system_secret: str
    console_url: str
    work_dir: Path

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.public_port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def secrets_config(self) -> Path:
        return self.work_dir / "hydra-secrets.yml"

    @property
    def log_file(self) -> Path:
        return self.work_dir / "hydra.log"

    def write_secrets_config(self) -> Path:
        # JSON is YAML: both values are quoted whatever characters they hold
        body = f"dsn: {json.dumps(self.dsn)}\nsecrets:\n  system:\n    - {json.dumps(self.system_secret)}\n"
        return write_private_file(self.secrets_config, body)

    def environment(self) -> dict[str, str]:
        inherited = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TZ", "LANG")}
        return {
            **inherited,
            "SERVE_PUBLIC_PORT": str(self.public_port),
            "SERVE_ADMIN_PORT": str(self.admin_port),
            "URLS_SELF_ISSUER": self.issuer,
            "URLS_LOGIN": f"{self.console_url}/oidc/login",
            "URLS_CONSENT": f"{self.console_url}/oidc/consent",
            "URLS_LOGOUT": f"{self.console_url}/oidc/logout",
            "URLS_POST_LOGOUT_REDIRECT": f"{self.console_url}/",
            "URLS_ERROR": f"{self.console_url}/oidc/error",
        }

    def command(self, *args: str) -> list[str]:
        return [str(HYDRA_BINARY), *args, "--config", str(HYDRA_CONFIG), "--config", str(self.secrets_config)]


async def create_database_role(admin_dsn: str, role: Identifier, password: str) -> str:
    """A login role owning a schema of its own name, its search path: Hydra's migrations create their
    tables there and nowhere else. Idempotent (the password is set each time). The role's DSN."""
    connection = await asyncpg.connect(admin_dsn)
    try:
        async with connection.transaction():
            exists = await connection.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", str(role))
            verb = "ALTER" if exists else "CREATE"
            # DDL takes no bind parameters: the server quotes the password as a literal
            literal = await connection.fetchval("SELECT quote_literal($1::text)", password)
            await connection.execute(f"{verb} ROLE {role.quoted} LOGIN PASSWORD {literal}")
            await connection.execute(f"CREATE SCHEMA IF NOT EXISTS {role.quoted} AUTHORIZATION {role.quoted}")
            await connection.execute(f"ALTER ROLE {role.quoted} SET search_path = {role.quoted}")
    finally:
        await connection.close()
    return runtime_dsn(admin_dsn, str(role), password)


async def drop_database_role(admin_dsn: str, role: Identifier) -> None:
    """Remove the role and its schema (test environments). Irreversible."""
    connection = await asyncpg.connect(admin_dsn)
    try:
        await drop(connection, SchemaPlan(role, owner_role=role, runtime_role=role, migrations=()))
    finally:
        await connection.close()


def migrate(instance: HydraInstance, log_file: Path | None = None) -> None:
    """Hydra's own SQL migrations, into the DSN role's schema. Its output goes to `log_file` (default the
    instance's log)."""
    instance.write_secrets_config()
    with (log_file or instance.log_file).open("ab") as log:
        result = subprocess.run(
            instance.command("migrate", "sql", "up", "--read-from-env", "--yes"),
            env=instance.environment(),
            stdout=log,
            stderr=log,
            timeout=MIGRATE_TIMEOUT_SECONDS,
            check=False,
        )
    if result.returncode != 0:
        raise RuntimeError(f"hydra migrate exited {result.returncode} (see {log_file or instance.log_file})")


def start(instance: HydraInstance, log_file: Path | None = None) -> subprocess.Popen[bytes]:
    """`hydra serve all`, in a session of its own, its output appended to `log_file` (default the
    instance's log)."""
    instance.write_secrets_config()
    with (log_file or instance.log_file).open("ab") as log:
        return subprocess.Popen(
            instance.command("serve", "all", "--dev"),
            env=instance.environment(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )


async def wait_ready(instance: HydraInstance, process: subprocess.Popen[bytes] | None = None) -> None:
    """`wait_until_ready` for `instance` (RuntimeError after a minute, or at once when `process` has
    exited)."""
    await wait_until_ready(instance.issuer, instance.admin_url, process)


async def wait_until_ready(
    issuer: str,
    admin_url: str,
    process: subprocess.Popen[bytes] | None = None,
    timeout_seconds: float = READY_TIMEOUT_SECONDS,
) -> None:
    """Until both the admin and the public API answer `/health/ready` and the JWKS serves its keys
    (RuntimeError after `timeout_seconds`, or at once when `process` has exited).

    Hydra makes its signing keys on the first request that needs them, not at start-up: an RSA key pair per
    key set, seconds of CPU on a busy machine. The JWKS request here is that first request, so no token
    request or health check ever waits on it (the doctor's 3 s check did, and reported the provider down)."""
    deadline = time.monotonic() + timeout_seconds
    async with httpx.AsyncClient(timeout=KEY_MAKING_TIMEOUT_SECONDS) as http:
        while True:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                admin = await http.get(f"{admin_url}/health/ready")
                public = await http.get(f"{issuer}/health/ready")
                if admin.status_code == public.status_code == 200:
                    jwks = await http.get(f"{issuer}/.well-known/jwks.json")
                    if jwks.status_code == 200 and len(jwks.json().get("keys", [])) >= 2:
                        return
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"hydra exited {process.returncode} (see its log)")
            if time.monotonic() > deadline:
                raise RuntimeError(f"hydra was not ready within {timeout_seconds:g} s")
            await asyncio.sleep(POLL_SECONDS)


@dataclass(frozen=True)
class ClientSpec:
    """An OAuth 2.0 client of the environment. A machine client has `grant_types=("client_credentials",)`
    and gets tokens for itself (`sub` is its id); the console and the dev-token client act for users."""

    client_id: str
    scopes: tuple[str, ...]
    audiences: tuple[str, ...]
    grant_types: tuple[str, ...] = ("client_credentials",)
    redirect_uris: tuple[str, ...] = ()
    post_logout_redirect_uris: tuple[str, ...] = ()

    def body(self, secret: str) -> dict[str, Any]:
        user_facing = "authorization_code" in self.grant_types
        return {
            "client_id": self.client_id,
            "client_secret": secret,
            "client_name": self.client_id,
            "grant_types": list(self.grant_types),
            "response_types": ["code"] if user_facing else [],
            "scope": " ".join(self.scopes),
            "audience": list(self.audiences),
            "redirect_uris": list(self.redirect_uris),
            "post_logout_redirect_uris": list(self.post_logout_redirect_uris),
            "token_endpoint_auth_method": "client_secret_basic",
            "skip_consent": False,
        }


@dataclass
class HydraAdmin:
    """Hydra's admin API (loopback only: it is never exposed)."""

    url: str
    http: httpx.AsyncClient

    async def ensure_client(self, spec: ClientSpec, secret: str) -> None:
        """Create the client, or set it to `spec` and `secret` when it exists (idempotent)."""
        body = spec.body(secret)
        response = await self.http.put(
            f"{self.url}/admin/clients/{quote(spec.client_id, safe='')}", json=body
        )
        if response.status_code == 404:
            response = await self.http.post(f"{self.url}/admin/clients", json=body)
        _expect(response, "register the client")

    async def signing_key_ids(self) -> list[str]:
        response = await self.http.get(f"{self.url}/admin/keys/{ACCESS_TOKEN_KEY_SET}")
        _expect(response, "read the signing keys")
        return [key["kid"] for key in response.json()["keys"]]

    async def add_signing_key(self, kid: str, algorithm: str = "RS256") -> None:
        """A new key in the access tokens' key set: Hydra signs with the newest key from now on."""
        response = await self.http.post(
            f"{self.url}/admin/keys/{ACCESS_TOKEN_KEY_SET}", json={"alg": algorithm, "kid": kid, "use": "sig"}
        )
        _expect(response, "add a signing key")

    async def import_signing_key(self, jwk: Mapping[str, Any]) -> None:
        """A key pair made elsewhere (a private JWK with its `kid`), into the access tokens' key set: its
        public half is served by the JWKS from now on (tests that need a token the issuer's JWKS verifies
        but whose claims Hydra would never issue)."""
        response = await self.http.put(
            f"{self.url}/admin/keys/{ACCESS_TOKEN_KEY_SET}/{quote(str(jwk['kid']), safe='')}", json=dict(jwk)
        )
        _expect(response, "import a signing key")

    async def remove_signing_key(self, kid: str) -> None:
        response = await self.http.delete(
            f"{self.url}/admin/keys/{ACCESS_TOKEN_KEY_SET}/{quote(kid, safe='')}"
        )
        _expect(response, "remove a signing key")

    async def login_request(self, challenge: str) -> Mapping[str, Any]:
        response = await self.http.get(
            f"{self.url}/admin/oauth2/auth/requests/login", params={"login_challenge": challenge}
        )
        _expect(response, "read the login request")
        return response.json()  # type: ignore[no-any-return]

    async def accept_login(
        self,
        challenge: str,
        subject: str,
        context: Mapping[str, Any],
        *,
        remember_seconds: int | None = None,
    ) -> str:
        """Accepts the login as `subject`; `context` reaches the consent request. With `remember_seconds`
        Hydra keeps a session for the browser that long (which RP-initiated logout then ends). The URL to
        send the user on to."""
        body: dict[str, Any] = {"subject": subject, "context": dict(context), "remember": False}
        if remember_seconds:
            body |= {"remember": True, "remember_for": remember_seconds}
        response = await self.http.put(
            f"{self.url}/admin/oauth2/auth/requests/login/accept",
            params={"login_challenge": challenge},
            json=body,
        )
        _expect(response, "accept the login")
        return str(response.json()["redirect_to"])

    async def accept_logout(self, challenge: str) -> str:
        """Accepts an RP-initiated logout: Hydra ends its session. The URL to send the user on to."""
        response = await self.http.put(
            f"{self.url}/admin/oauth2/auth/requests/logout/accept", params={"logout_challenge": challenge}
        )
        _expect(response, "accept the logout")
        return str(response.json()["redirect_to"])

    async def consent_request(self, challenge: str) -> Mapping[str, Any]:
        response = await self.http.get(
            f"{self.url}/admin/oauth2/auth/requests/consent", params={"consent_challenge": challenge}
        )
        _expect(response, "read the consent request")
        return response.json()  # type: ignore[no-any-return]

    async def accept_consent(self, challenge: str, scopes: Sequence[str], audiences: Sequence[str]) -> str:
        response = await self.http.put(
            f"{self.url}/admin/oauth2/auth/requests/consent/accept",
            params={"consent_challenge": challenge},
            json={
                "grant_scope": list(scopes),
                "grant_access_token_audience": list(audiences),
                "remember": False,
            },
        )
        _expect(response, "accept the consent")
        return str(response.json()["redirect_to"])


class HydraAdminError(RuntimeError):
    """The admin API refused (`status` < 500: an unknown, used or expired challenge, say) or failed."""

    def __init__(self, what: str, status: int) -> None:
        super().__init__(f"hydra admin: could not {what}: HTTP {status}")
        self.status = status


def _expect(response: httpx.Response, what: str) -> None:
    if response.status_code >= 300:
        raise HydraAdminError(what, response.status_code)


@contextlib.asynccontextmanager
async def hydra_environment(instance: HydraInstance) -> AsyncIterator[HydraAdmin]:
    """Migrate and start `instance`, yield its admin API once it is ready, stop it on exit."""
    instance.work_dir.mkdir(parents=True, exist_ok=True)
    await asyncio.to_thread(migrate, instance)
    process = start(instance)
    try:
        await wait_ready(instance, process)
        async with httpx.AsyncClient(timeout=10.0) as http:
            yield HydraAdmin(instance.admin_url, http)
    finally:
        await asyncio.to_thread(stop_process, process)


@dataclass(frozen=True)
class TokenSet:
    """A token endpoint's answer (RFC 6749 5.1). Secrets all: never log or print more than asked for."""

    access_token: str
    refresh_token: str | None
    id_token: str | None
    expires_in: int

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> TokenSet:
        return cls(
            body["access_token"], body.get("refresh_token"), body.get("id_token"), int(body["expires_in"])
        )


def _pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def _query_value(location: str, name: str) -> str:
    values = parse_qs(urlsplit(location).query).get(name)
    if not values:
        raise RuntimeError(f"hydra: the redirect carries no {name}")
    return values[0]


async def signed_in_tokens(
    issuer: str,
    admin: HydraAdmin,
    client: ClientSpec,
    client_secret: str,
    *,
    subject: str,
    permissions: Sequence[str],
    audiences: Sequence[str],
) -> TokenSet:
    """The tokens a user gets by signing in through `client` (authorization code with PKCE), the login and
    consent accepted through the admin API as the console's login pages accept them: `subject` signs in and
    is granted `permissions` for `audiences`. For `make dev-token` and the tests; the redirect to the
    client is read, never followed."""
    if not client.redirect_uris:
        raise ValueError("the client has no redirect URI: it cannot take an authorization code")
    redirect_uri = client.redirect_uris[0]
    verifier, challenge = _pkce_pair()
    state = secrets.token_urlsafe(16)
    scopes = ["openid", "offline_access", *permissions]
    async with httpx.AsyncClient(timeout=10.0, follow_redirects=False) as browser:  # keeps Hydra's cookies
        response = await browser.get(
            f"{issuer}/oauth2/auth",
            params={
                "response_type": "code",
                "client_id": client.client_id,
                "redirect_uri": redirect_uri,
                "scope": " ".join(scopes),
                "audience": " ".join(audiences),
                "state": state,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            },
        )
        login = _query_value(response.headers.get("location", ""), "login_challenge")
        response = await browser.get(await admin.accept_login(login, subject, {}))
        consent = _query_value(response.headers.get("location", ""), "consent_challenge")
        response = await browser.get(await admin.accept_consent(consent, scopes, audiences))
        location = response.headers.get("location", "")
        if _query_value(location, "state") != state:
            raise RuntimeError("hydra: the redirect carries another state")
        response = await browser.post(
            f"{issuer}/oauth2/token",
            data={
                "grant_type": "authorization_code",
                "code": _query_value(location, "code"),
                "redirect_uri": redirect_uri,
                "code_verifier": verifier,
            },
            auth=(client.client_id, client_secret),
        )
    _expect(response, "exchange the code")
    return TokenSet.of(response.json())


async def refreshed_tokens(issuer: str, client_id: str, client_secret: str, refresh_token: str) -> TokenSet:
    """The refresh grant: a new token set (Hydra rotates the refresh token). RuntimeError when refused."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.post(
            f"{issuer}/oauth2/token",
            data={"grant_type": "refresh_token", "refresh_token": refresh_token},
            auth=(client_id, client_secret),
        )
    _expect(response, "refresh the tokens")
    return TokenSet.of(response.json())


async def revoke_token(issuer: str, client_id: str, client_secret: str, token: str) -> None:
    """RFC 7009 revocation (of a refresh token: the grant it belongs to ends)."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.post(
            f"{issuer}/oauth2/revoke", data={"token": token}, auth=(client_id, client_secret)
        )
    _expect(response, "revoke the token")


async def machine_token(
    issuer: str, client_id: str, client_secret: str, *, scopes: Sequence[str], audiences: Sequence[str]
) -> str:
    """A `client_credentials` access token: the client acts as itself (`sub` is its id)."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.post(
            f"{issuer}/oauth2/token",
            data={
                "grant_type": "client_credentials",
                "scope": " ".join(scopes),
                "audience": " ".join(audiences),
            },
            auth=(client_id, client_secret),
        )
    _expect(response, "issue a machine token")
    return str(response.json()["access_token"])


@dataclass(frozen=True)
class PrivateHydra:
    instance: HydraInstance
    admin: HydraAdmin
    client_secrets: Mapping[str, str]


@contextlib.asynccontextmanager
async def private_hydra(
    admin_dsn: str,
    work_dir: Path,
    clients: Sequence[ClientSpec],
    *,
    console_url: str = UNSERVED_CONSOLE_URL,
) -> AsyncIterator[PrivateHydra]:
    """A Hydra of its own on free loopback ports (a role and schema of its own, dropped on exit) with
    `clients` registered under fresh secrets: for tests and benchmarks. Its login, consent and logout pages
    are `console_url`'s (by default nothing serves them: logins are accepted through the admin API)."""
    role = Identifier(f"hydra_{secrets.token_hex(5)}")
    dsn = await create_database_role(admin_dsn, role, secrets.token_urlsafe(24))
    instance = HydraInstance(
        public_port=free_port(),
        admin_port=free_port(),
        dsn=dsn,
        system_secret=secrets.token_urlsafe(32),
        console_url=console_url,
        work_dir=work_dir,
    )
    client_secrets = {client.client_id: secrets.token_urlsafe(32) for client in clients}
    try:
        async with hydra_environment(instance) as admin:
            for client in clients:
                await admin.ensure_client(client, client_secrets[client.client_id])
            yield PrivateHydra(instance, admin, client_secrets)
    finally:
        await drop_database_role(admin_dsn, role)
