"""OAuth 2.0 access tokens of an OpenID provider: JWTs (RFC 9068) signed with a key of the issuer's JWKS.

`AccessTokenVerifier.verify` accepts a token only when all of these hold, and answers every other token with
the same `AuthError`:

- its header names an allowed asymmetric algorithm and a `kid`, and names no key of its own (`jku`, `jwk`,
  `x5u`, `x5c`): the key always comes from the configured issuer's JWKS, never from the token;
- the issuer's key `kid` has that same algorithm, and the signature verifies with it;
- `iss` is the configured issuer, `aud` names this service, `sub`, `iat` and `exp` are there, and the times
  hold with the small leeway (`auth.check_times`).

Permissions come from one claim, through a mapping that is a setting (`PermissionMapping`): Hydra grants them
as scopes (`scp`), Keycloak as roles (`realm_access.roles`), Entra ID as app roles (`roles`), Okta as groups.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar
from urllib.parse import urlsplit

import httpx
import jwt
from fastapi import Depends, Request
from prometheus_client import CollectorRegistry, Counter
from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from yovision_platform.observability._metrics import LabeledMetric, labeled_counter
from yovision_platform.settings import BaseServiceSettings, is_loopback_host
from yovision_platform.web._auth import (
    DECODE_OPTIONS,
    JWT_LEEWAY_SECONDS_DEFAULT,
    JWT_LEEWAY_SECONDS_MAX,
    PERMISSION_PATTERN,
    AuthError,
    BearerToken,
    Identity,
    check_times,
    checked_subject,
)
from yovision_platform.web._jwks import (
    ASYMMETRIC_ALGORITHMS,
    REFRESH_SECONDS_DEFAULT,
    FetchOutcome,
    IssuerKeys,
)

if TYPE_CHECKING:
    from yovision_platform.web._service import WebContext

__all__ = [
    "KEY_BEARING_HEADERS",
    "AccessTokenCaller",
    "AccessTokenMetrics",
    "AccessTokenSettings",
    "AccessTokenVerifier",
    "PermissionMapping",
    "Refusal",
    "TokenRefused",
    "checked_url",
    "use_access_token_verifier",
    "use_access_tokens",
    "verified_claims",
]

# Header parameters that carry or point at a key (RFC 7515 4.1): a verifier that used one would let the
# token choose the key that verifies it.
KEY_BEARING_HEADERS = frozenset({"jku", "jwk", "x5u", "x5c"})
UNKNOWN_KID_LOG_INTERVAL_SECONDS = 60.0

log = logging.getLogger("yovision_platform.access_tokens")


class Refusal(enum.Enum):
    """Why a token was refused, for a metric only (never for the answer, which is always the same)."""

    MALFORMED = "malformed"
    UNKNOWN_KID = "unknown_kid"
    INVALID = "invalid"


@dataclass(frozen=True)
class PermissionMapping:
    """Which claim holds the grants (a dotted path into the claims, e.g. `realm_access.roles`), and what
    each grant means. Without `grants`, a value shaped like a permission (`signal:read`) is that permission
    and any other (`openid`, `offline_access`) means nothing; with `grants`, only the values it lists count,
    each for the permissions it maps to. A claim may be a list or a space-separated string (`scope`)."""

    claim: str = "scp"
    grants: Mapping[str, frozenset[str]] | None = None

    def __post_init__(self) -> None:
        if not self.claim or any(not part for part in self.claim.split(".")):
            raise ValueError("the permissions claim must be a dotted path of claim names")
        for permissions in (self.grants or {}).values():
            if not all(PERMISSION_PATTERN.fullmatch(p) for p in permissions):
                raise ValueError("every mapped permission must look like service:action")

    def permissions(self, claims: Mapping[str, Any]) -> frozenset[str]:
        value: Any = claims
        for part in self.claim.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if isinstance(value, str):
            value = value.split()
        if not isinstance(value, list):
            return frozenset()
        granted = [v for v in value if isinstance(v, str)]
        if self.grants is None:
            return frozenset(v for v in granted if PERMISSION_PATTERN.fullmatch(v))
        return frozenset().union(*(self.grants.get(v, frozenset()) for v in granted))


class TokenRefused(Exception):
    """`verified_claims` refused the token, for `reason` (a metric's label, never an answer's)."""

    def __init__(self, reason: Refusal) -> None:
        super().__init__(reason.value)
        self.reason = reason


async def verified_claims(
    token: str,
    keys: IssuerKeys,
    *,
    issuer: str,
    audience: str,
    leeway_seconds: int,
    now: float | None = None,
) -> dict[str, Any]:
    """The claims of a JWT the issuer signed, every check of the module docstring passed (the header, the
    key from `keys` alone, `iss`, `aud`, `sub` and the times); `TokenRefused` otherwise. The services'
    access tokens and the console's ID tokens both pass through here."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise TokenRefused(Refusal.MALFORMED) from None
    algorithm, kid = header.get("alg"), header.get("kid")
    if not isinstance(algorithm, str) or not isinstance(kid, str) or not kid:
        raise TokenRefused(Refusal.INVALID)
    if KEY_BEARING_HEADERS & header.keys() or algorithm not in keys.algorithms:
        raise TokenRefused(Refusal.INVALID)
    key = await keys.key(kid)
    if key is None:
        raise TokenRefused(Refusal.UNKNOWN_KID)
    if key.algorithm != algorithm:
        raise TokenRefused(Refusal.INVALID)
    try:
        claims: dict[str, Any] = jwt.decode(
            token, key.key, algorithms=[key.algorithm], issuer=issuer, audience=audience,
            options=DECODE_OPTIONS,
        )  # fmt: skip
        check_times(claims, now=now, leeway_seconds=leeway_seconds)
        checked_subject(claims)
    except (jwt.PyJWTError, AuthError):
        raise TokenRefused(Refusal.INVALID) from None
    return claims


@dataclass
class AccessTokenVerifier:
    """Verifies the access tokens of one issuer for one audience (see the module docstring)."""

    keys: IssuerKeys
    issuer: str
    audience: str
    mapping: PermissionMapping = field(default_factory=PermissionMapping)
    leeway_seconds: int = JWT_LEEWAY_SECONDS_DEFAULT
    on_refusal: Callable[[Refusal], None] = lambda reason: None
    _unknown_kid_logged_at: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not 0 <= self.leeway_seconds <= JWT_LEEWAY_SECONDS_MAX:
            raise ValueError(f"leeway_seconds must be within 0..{JWT_LEEWAY_SECONDS_MAX}")

    async def verify(self, token: str, *, now: float | None = None) -> Identity:
        try:
            claims = await verified_claims(
                token, self.keys, issuer=self.issuer, audience=self.audience,
                leeway_seconds=self.leeway_seconds, now=now,
            )  # fmt: skip
        except TokenRefused as refused:
            if refused.reason is Refusal.UNKNOWN_KID:
                self._log_unknown_kid()
            raise self._refused(refused.reason) from None
        return Identity(claims["sub"], self.mapping.permissions(claims))

    def _refused(self, reason: Refusal) -> AuthError:
        self.on_refusal(reason)
        return AuthError()

    def _log_unknown_kid(self) -> None:
        now = time.monotonic()
        last = self._unknown_kid_logged_at
        if last is None or now - last >= UNKNOWN_KID_LOG_INTERVAL_SECONDS:
            self._unknown_kid_logged_at = now
            log.warning("access_token_unknown_kid", extra={"issuer": self.issuer})


def checked_url(value: str) -> str:
    """An https URL, or http on a loopback address only (the local stack): a token's keys must never come
    over a connection anyone on the path could change. Kept exactly as given: an issuer is compared with
    `iss` character for character (Auth0's ends in `/`, Hydra's and Keycloak's do not)."""
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.username or parts.password:
        raise ValueError("must be an https URL (http only on a loopback address), without credentials")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ValueError("must be https unless the host is a loopback address")
    return value


class AccessTokenSettings(BaseServiceSettings):
    """Settings of a service whose API takes the OpenID provider's access tokens:

    - `<P>AUTH_ISSUER`: the issuer, exactly as its tokens' `iss` (https, or http on loopback);
    - `<P>AUTH_AUDIENCE`: what `aud` must name (default: the subclass's `audience`, the service's name; a
      provider that issues one audience per token, as Auth0 and Entra ID do, may share one among services);
    - `<P>AUTH_JWKS_URL`: its JWKS (default `<issuer>/.well-known/jwks.json`, Hydra's and Auth0's path;
      Keycloak's is `<issuer>/protocol/openid-connect/certs`);
    - `<P>AUTH_ALGORITHMS`: the signature algorithms allowed (default `RS256,ES256`; asymmetric only);
    - `<P>AUTH_LEEWAY_SECONDS`: clock tolerance, 0..60, default 5;
    - `<P>AUTH_PERMISSIONS_CLAIM` (default `scp`) and `<P>AUTH_PERMISSIONS_MAP` (JSON `{"grant":
      ["service:action", ...]}`, optional): see `PermissionMapping`;
    - `<P>AUTH_JWKS_REFRESH_SECONDS`: how soon a key the issuer removed stops verifying (10..86400, 300).
    """

    audience: ClassVar[str]

    auth_issuer: str = Field(min_length=1, max_length=512)
    auth_audience: str | None = Field(default=None, min_length=1, max_length=256, pattern=r"^[\x21-\x7e]+$")
    auth_jwks_url: str | None = Field(default=None, max_length=512)
    auth_algorithms: Annotated[frozenset[str], NoDecode] = frozenset({"RS256", "ES256"})
    auth_leeway_seconds: int = Field(default=JWT_LEEWAY_SECONDS_DEFAULT, ge=0, le=JWT_LEEWAY_SECONDS_MAX)
    auth_permissions_claim: str = Field(default="scp", min_length=1, max_length=128)
    auth_permissions_map: dict[str, frozenset[str]] | None = None
    auth_jwks_refresh_seconds: float = Field(default=REFRESH_SECONDS_DEFAULT, ge=10, le=86400)

    @field_validator("auth_issuer", "auth_jwks_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else checked_url(value)

    @field_validator("auth_algorithms", mode="before")
    @classmethod
    def _algorithms(cls, value: object) -> object:
        if isinstance(value, str):
            value = frozenset(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("auth_algorithms")
    @classmethod
    def _asymmetric(cls, value: frozenset[str]) -> frozenset[str]:
        if not value or not value <= ASYMMETRIC_ALGORITHMS:
            raise ValueError(f"one or more of {', '.join(sorted(ASYMMETRIC_ALGORITHMS))}")
        return value

    @field_validator("auth_permissions_claim")
    @classmethod
    def _claim(cls, value: str) -> str:
        PermissionMapping(value)
        return value

    @field_validator("auth_permissions_map")
    @classmethod
    def _grants(cls, value: dict[str, frozenset[str]] | None) -> dict[str, frozenset[str]] | None:
        PermissionMapping(grants=value)
        return value

    @property
    def jwks_url(self) -> str:
        return self.auth_jwks_url or f"{self.auth_issuer.rstrip('/')}/.well-known/jwks.json"

    @property
    def token_audience(self) -> str:
        """What a token's `aud` must name for this service."""
        return self.auth_audience or self.audience

    def permission_mapping(self) -> PermissionMapping:
        return PermissionMapping(self.auth_permissions_claim, self.auth_permissions_map)

    def access_token_verifier(
        self, http: httpx.AsyncClient, metrics: AccessTokenMetrics | None = None
    ) -> AccessTokenVerifier:
        """A verifier for this service's audience; `http` fetches the JWKS (the caller closes it)."""
        keys = IssuerKeys(
            self.jwks_url,
            self.auth_algorithms,
            http,
            refresh_seconds=self.auth_jwks_refresh_seconds,
            on_fetch=metrics.fetched if metrics else lambda outcome: None,
        )
        return AccessTokenVerifier(
            keys,
            self.auth_issuer,
            self.token_audience,
            self.permission_mapping(),
            self.auth_leeway_seconds,
            on_refusal=metrics.refused if metrics else lambda reason: None,
        )


@dataclass(frozen=True)
class AccessTokenMetrics:
    """`access_token_refusals_total{reason}` and `jwks_fetches_total{outcome}` in a service's registry."""

    refusals: LabeledMetric[Counter]
    fetches: LabeledMetric[Counter]

    @classmethod
    def register(cls, registry: CollectorRegistry) -> AccessTokenMetrics:
        return cls(
            labeled_counter(
                registry,
                "access_token_refusals_total",
                "Access tokens refused, by reason (every refusal answers the same 401)",
                {"reason": Refusal},
            ),
            labeled_counter(
                registry,
                "jwks_fetches_total",
                "Fetches of the issuer's JWKS, by outcome",
                {"outcome": FetchOutcome},
            ),
        )

    def refused(self, reason: Refusal) -> None:
        self.refusals.labels(reason=reason).inc()

    def fetched(self, outcome: FetchOutcome) -> None:
        self.fetches.labels(outcome=outcome).inc()


def use_access_token_verifier(app: Any, verifier: AccessTokenVerifier) -> None:
    """The verifier `AccessTokenCaller` checks `app`'s bearer tokens with (tests and tools build their own;
    a service's entrypoint calls `use_access_tokens`)."""
    app.state.access_token_verifier = verifier


def use_access_tokens(ctx: WebContext[Any]) -> AccessTokenVerifier:
    """The service's verifier (from its `AccessTokenSettings`), on `ctx.app` for `AccessTokenCaller`, its
    metrics in the service's registry; its JWKS client is closed when the service stops."""
    settings: AccessTokenSettings = ctx.settings
    http = httpx.AsyncClient(follow_redirects=False)
    verifier = settings.access_token_verifier(http, AccessTokenMetrics.register(ctx.registry))
    use_access_token_verifier(ctx.app, verifier)

    async def close(stop: asyncio.Event) -> None:
        await stop.wait()
        await verifier.keys.aclose()
        await http.aclose()

    ctx.add_worker("access-token-keys", close)
    return verifier


async def _access_token_caller(request: Request, token: BearerToken) -> Identity:
    verifier: AccessTokenVerifier = request.app.state.access_token_verifier
    return await verifier.verify(token)


# The identity of a route's caller: the access token's subject and permissions (401 otherwise).
AccessTokenCaller = Annotated[Identity, Depends(_access_token_caller)]
