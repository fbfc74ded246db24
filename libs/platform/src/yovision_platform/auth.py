"""Bearer-token identity for the services' HTTP APIs.

Two kinds of bearer token:

- **JWT (HS256)** for user-facing APIs: a `TokenVerifier` holds a key read from a file (>= 32 bytes), and
  accepts only HS256 tokens with `sub`, `exp`, `iat`, the configured `iss` and `aud`; `perm` is an optional
  list of permission strings (e.g. `signal:read`). `mint` exists for dev tooling and tests.
- **Static service token** for operator/service-to-service APIs (e.g. Sense's Control API): a
  `StaticBearerToken` read from a file, compared in constant time.

Every failure is the same `AuthError` (`unauthorized`): the response never says which check failed.

Routes take the token through `BearerToken` (a JWT) or `OperatorToken` (a static token): both read the
same header, and each names its OpenAPI security scheme (`bearerJwt`, `operatorToken`), so the published
documents say which credential every operation needs (and `yovision_platform.web` adds its 401).
"""

from __future__ import annotations

import hmac
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, ClassVar

import jwt
from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from jwt.types import Options
from pydantic import Field, PrivateAttr

from yovision_platform.errors import ServiceError
from yovision_platform.settings import BaseServiceSettings, read_secret_file
from yovision_platform.signing import MIN_KEY_BYTES, load_key_file

__all__ = [
    "AuthError",
    "BearerToken",
    "Forbidden",
    "Identity",
    "JwtIdentitySettings",
    "OperatorToken",
    "StaticBearerToken",
    "TokenVerifier",
    "bearer_token",
    "use_token_verifier",
]

JWT_ALGORITHM = "HS256"
# Clock tolerance for `exp`, `iat` and `nbf`: `<P>AUTH_JWT_LEEWAY_SECONDS`, default 5 s, at most 60 s. A token
# is accepted while now < exp + leeway (RFC 7519: "before" the expiry), so it may outlive its `exp` by less
# than the leeway and never more.
JWT_LEEWAY_SECONDS_DEFAULT = 5
JWT_LEEWAY_SECONDS_MAX = 60
JWT_MAX_TTL_SECONDS = 24 * 3600
MIN_STATIC_TOKEN_CHARS = 32
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


class TokenVerifier:
    def __init__(
        self, key: bytes, *, issuer: str, audience: str, leeway_seconds: int = JWT_LEEWAY_SECONDS_DEFAULT
    ) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"JWT key must be at least {MIN_KEY_BYTES} bytes")
        if not 0 <= leeway_seconds <= JWT_LEEWAY_SECONDS_MAX:
            raise ValueError(f"leeway_seconds must be within 0..{JWT_LEEWAY_SECONDS_MAX}")
        self._key = key
        self._issuer = issuer
        self._audience = audience
        self._leeway = leeway_seconds

    @classmethod
    def from_key_file(
        cls,
        path: str | os.PathLike[str],
        setting_name: str,
        *,
        issuer: str,
        audience: str,
        leeway_seconds: int = JWT_LEEWAY_SECONDS_DEFAULT,
    ) -> TokenVerifier:
        return cls(
            load_key_file(path, setting_name), issuer=issuer, audience=audience, leeway_seconds=leeway_seconds
        )

    def verify(self, token: str, *, now: float | None = None) -> Identity:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                self._key,
                algorithms=[JWT_ALGORITHM],
                issuer=self._issuer,
                audience=self._audience,
                options=DECODE_OPTIONS,
            )
        except jwt.PyJWTError:
            raise AuthError() from None
        check_times(claims, now=now, leeway_seconds=self._leeway)
        permissions = claims.get("perm", [])
        if not isinstance(permissions, list) or not all(
            isinstance(p, str) and PERMISSION_PATTERN.fullmatch(p) for p in permissions
        ):
            raise AuthError()
        return Identity(checked_subject(claims), frozenset(permissions))

    def mint(
        self,
        subject: str,
        permissions: Iterable[str] = (),
        *,
        ttl_seconds: int = 3600,
        now: float | None = None,
    ) -> str:
        if not 1 <= ttl_seconds <= JWT_MAX_TTL_SECONDS:
            raise ValueError(f"ttl_seconds must be within 1..{JWT_MAX_TTL_SECONDS}")
        issued = int(time.time() if now is None else now)
        claims = {
            "sub": subject,
            "iss": self._issuer,
            "aud": self._audience,
            "iat": issued,
            "exp": issued + ttl_seconds,
            "perm": sorted(set(permissions)),
        }
        return jwt.encode(claims, self._key, algorithm=JWT_ALGORITHM)


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


class StaticBearerToken:
    """One shared secret token (>= 32 characters) from a file, compared in constant time."""

    def __init__(self, token: str) -> None:
        if len(token) < MIN_STATIC_TOKEN_CHARS:
            raise ValueError(f"static bearer token must be at least {MIN_STATIC_TOKEN_CHARS} characters")
        self._token = token.encode()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], setting_name: str) -> StaticBearerToken:
        return cls(read_secret_file(path, setting_name, min_bytes=MIN_STATIC_TOKEN_CHARS).get_secret_value())

    def verify(self, presented: str) -> None:
        if not hmac.compare_digest(presented.encode(), self._token):
            raise AuthError()


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
OPERATOR_SCHEME = HTTPBearer(
    scheme_name="operatorToken",
    description="The static operator token of the service's `<P>API_TOKEN_FILE` (at least "
    f"{MIN_STATIC_TOKEN_CHARS} characters).",
    auto_error=False,
)
Credentials = HTTPAuthorizationCredentials | None


def _jwt_bearer(request: Request, _: Annotated[Credentials, Security(JWT_SCHEME)]) -> str:
    return bearer_token(request)


def _operator_bearer(request: Request, _: Annotated[Credentials, Security(OPERATOR_SCHEME)]) -> str:
    return bearer_token(request)


BearerToken = Annotated[str, Depends(_jwt_bearer)]
OperatorToken = Annotated[str, Depends(_operator_bearer)]


def use_token_verifier(app: Any, verifier: TokenVerifier) -> None:
    """The verifier `Caller` checks the app's bearer JWTs with."""
    app.state.token_verifier = verifier


def _caller(request: Request, token: BearerToken) -> Identity:
    verifier: TokenVerifier = request.app.state.token_verifier
    return verifier.verify(token)


Caller = Annotated[Identity, Depends(_caller)]


class JwtIdentitySettings(BaseServiceSettings):
    """Settings of a service whose API identifies users by JWT: `<P>AUTH_JWT_KEY_FILE` (hex key file,
    >= 32 bytes), `<P>AUTH_JWT_ISSUER` and `<P>AUTH_JWT_LEEWAY_SECONDS` (clock tolerance, 0..60, default 5);
    the audience is the subclass's `jwt_audience` (its name)."""

    jwt_audience: ClassVar[str]

    auth_jwt_key_file: Path
    auth_jwt_issuer: str = Field(min_length=1, max_length=128)
    auth_jwt_leeway_seconds: int = Field(default=JWT_LEEWAY_SECONDS_DEFAULT, ge=0, le=JWT_LEEWAY_SECONDS_MAX)

    _token_verifier: TokenVerifier | None = PrivateAttr(default=None)

    def load_secret_files(self) -> None:
        super().load_secret_files()
        self._token_verifier = TokenVerifier.from_key_file(
            self.auth_jwt_key_file,
            self.env_var_name("auth_jwt_key_file"),
            issuer=self.auth_jwt_issuer,
            audience=self.jwt_audience,
            leeway_seconds=self.auth_jwt_leeway_seconds,
        )

    @property
    def token_verifier(self) -> TokenVerifier:
        """The verifier built by `load_secret_files` (which `load_settings` always runs)."""
        if self._token_verifier is None:
            self.load_secret_files()
        assert self._token_verifier is not None
        return self._token_verifier
