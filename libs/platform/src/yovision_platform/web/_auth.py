"""Bearer-token identity for the services' HTTP APIs: what every access token check shares, whatever
signed the token (`yovision_platform.web` verifies the OpenID provider's tokens).

- `Identity`: the caller (a user's or a machine client's subject) and its permissions; `require` answers
  `403 forbidden` naming the missing permission.
- `AuthError`: the one `401 unauthorized` for every credential that is missing, malformed, foreign or
  invalid. The response never says which check failed.
- `check_times` and `checked_subject`: the time claims with their leeway, and the subject's shape.
- `BearerToken`: the route dependency reading `Authorization: Bearer <token>`; it names the OpenAPI
  security scheme `bearerJwt`, so the published documents say which credential every operation needs (and
  `yovision_platform.web` adds its 401).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from jwt.types import Options

from yovision_platform.errors import ServiceError

__all__ = [
    "AuthError",
    "BearerToken",
    "Forbidden",
    "Identity",
    "bearer_token",
    "check_times",
    "checked_subject",
]

# Clock tolerance for `exp`, `iat` and `nbf`: `<P>AUTH_LEEWAY_SECONDS`, default 5 s, at most 60 s. A token
# is accepted while now < exp + leeway (RFC 7519: "before" the expiry), so it may outlive its `exp` by less
# than the leeway and never more.
JWT_LEEWAY_SECONDS_DEFAULT = 5
JWT_LEEWAY_SECONDS_MAX = 60
JWT_MAX_TTL_SECONDS = 24 * 3600
# What `jwt.decode` checks itself: the signature, `iss`, `aud`, and that these claims are there. The time
# claims are checked by `check_times` against a `now` the caller may pin (tests).
DECODE_OPTIONS: Options = {
    "require": ["sub", "exp", "iat", "iss", "aud"],
    "verify_exp": False,
    "verify_iat": False,
    "verify_nbf": False,
}
SUBJECT_PATTERN = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
PERMISSION_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,31}:[a-z][a-z0-9_-]{0,31}")


class AuthError(ServiceError):
    """No valid bearer token. Uniform on purpose."""

    code = "unauthorized"
    status = 401
    headers = MappingProxyType({"WWW-Authenticate": "Bearer"})


class Forbidden(ServiceError):
    """A valid identity without the permission the endpoint requires; the answer names that permission (a
    constant of the service, never the caller's input)."""

    code = "forbidden"
    status = 403

    def __init__(self, permission: str | None = None) -> None:
        super().__init__(detail=None if permission is None else f"requires the permission {permission}")
        self.permission = permission


@dataclass(frozen=True)
class Identity:
    subject: str
    permissions: frozenset[str]

    def require(self, permission: str) -> None:
        if permission not in self.permissions:
            raise Forbidden(permission)


def check_times(claims: Mapping[str, Any], *, now: float | None, leeway_seconds: int) -> None:
    """`iat`, `exp` and `nbf` (default `iat`) are numbers; the token lives at most a day; now is before
    `exp` + leeway and after `iat` and `nbf` - leeway. AuthError otherwise."""
    issued, expires, not_before = claims["iat"], claims["exp"], claims.get("nbf", claims["iat"])
    current = time.time() if now is None else now
    times = (issued, expires, not_before)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in times):
        raise AuthError()
    if expires - issued > JWT_MAX_TTL_SECONDS or current >= expires + leeway_seconds:
        raise AuthError()
    if issued > current + leeway_seconds or not_before > current + leeway_seconds:
        raise AuthError()


def checked_subject(claims: Mapping[str, Any]) -> str:
    subject = claims["sub"]
    if not isinstance(subject, str) or SUBJECT_PATTERN.fullmatch(subject) is None:
        raise AuthError()
    return subject


def bearer_token(request: Request) -> str:
    """The token of an `Authorization: Bearer <token>` header; AuthError otherwise."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token or " " in token.strip():
        raise AuthError()
    return token.strip()


# auto_error=False: a missing or malformed header is our uniform AuthError, never FastAPI's own 403.
JWT_SCHEME = HTTPBearer(
    scheme_name="bearerJwt",
    bearerFormat="JWT",
    description="An access token of the OpenID provider (a JWT signed RS256 or ES256 with a key of the "
    "issuer's JWKS) whose `aud` names this service; `sub` is the caller (a user, or a machine client's id) "
    "and the permissions come from the configured claim (`scp` by default). A missing, malformed, expired, "
    "foreign or otherwise invalid token is the same 401.",
    auto_error=False,
)
Credentials = HTTPAuthorizationCredentials | None


def _jwt_bearer(request: Request, _: Annotated[Credentials, Security(JWT_SCHEME)]) -> str:
    return bearer_token(request)


BearerToken = Annotated[str, Depends(_jwt_bearer)]
