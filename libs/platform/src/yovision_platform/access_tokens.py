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

import enum
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jwt

from yovision_platform.auth import (
    DECODE_OPTIONS,
    JWT_LEEWAY_SECONDS_DEFAULT,
    JWT_LEEWAY_SECONDS_MAX,
    PERMISSION_PATTERN,
    AuthError,
    Identity,
    check_times,
    checked_subject,
)
from yovision_platform.jwks import IssuerKeys

__all__ = ["KEY_BEARING_HEADERS", "AccessTokenVerifier", "PermissionMapping", "Refusal"]

# Header parameters that carry or point at a key (RFC 7515 4.1): a verifier that used one would let the
# token choose the key that verifies it.
KEY_BEARING_HEADERS = frozenset({"jku", "jwk", "x5u", "x5c"})
UNKNOWN_KID_LOG_INTERVAL_SECONDS = 60.0

log = logging.getLogger(__name__)


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
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise self._refused(Refusal.MALFORMED) from None
        algorithm, kid = header.get("alg"), header.get("kid")
        if KEY_BEARING_HEADERS & header.keys() or algorithm not in self.keys.algorithms:
            raise self._refused(Refusal.INVALID)
        if not isinstance(kid, str) or not kid:
            raise self._refused(Refusal.INVALID)
        key = await self.keys.key(kid)
        if key is None:
            self._log_unknown_kid()
            raise self._refused(Refusal.UNKNOWN_KID)
        if key.algorithm != algorithm:
            raise self._refused(Refusal.INVALID)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[key.algorithm],
                issuer=self.issuer,
                audience=self.audience,
                options=DECODE_OPTIONS,
            )
            check_times(claims, now=now, leeway_seconds=self.leeway_seconds)
            subject = checked_subject(claims)
        except (jwt.PyJWTError, AuthError):
            raise self._refused(Refusal.INVALID) from None
        return Identity(subject, self.mapping.permissions(claims))

    def _refused(self, reason: Refusal) -> AuthError:
        self.on_refusal(reason)
        return AuthError()

    def _log_unknown_kid(self) -> None:
        now = time.monotonic()
        last = self._unknown_kid_logged_at
        if last is None or now - last >= UNKNOWN_KID_LOG_INTERVAL_SECONDS:
            self._unknown_kid_logged_at = now
            log.warning("access_token_unknown_kid", extra={"issuer": self.issuer})
