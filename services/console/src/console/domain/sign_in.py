"""Signing in with OpenID Connect (authorization code + PKCE): what the console keeps, the rules it applies.

- A sign-in starts as a `PendingSignIn`: the `state`, the `nonce` and the PKCE verifier (S256) the console
  keeps in the session until the provider sends the browser back to the callback. A session holds at most
  `PENDING_SIGN_INS_MAX` of them (a user may start signing in from two tabs), each for
  `PENDING_SIGN_IN_SECONDS` (the provider's own login request lives 10 minutes).
- A signed-in session is a `SignedIn`: the subject (the ID token's `sub`), the permissions (the granted
  scopes shaped `service:action`) and the provider's `Tokens`.
- An access token is refreshed once it has less than the refresh margin left (`Tokens.due`).

Nothing here does I/O: the provider is `console.adapters.openid`, the flow `console.service_layer.sign_in`.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from yovision_platform.web import PERMISSION_PATTERN

__all__ = [
    "CHALLENGE_PATTERN",
    "OPENID_SCOPES",
    "PENDING_SIGN_INS_MAX",
    "PENDING_SIGN_IN_SECONDS",
    "PendingSignIn",
    "SignedIn",
    "TokenAnswer",
    "Tokens",
    "granted_permissions",
    "granted_scopes",
    "permissions_of",
    "s256",
]

PENDING_SIGN_IN_SECONDS = 600
PENDING_SIGN_INS_MAX = 3
STATE_BYTES = 32  # 43 characters of base64url
PKCE_VERIFIER_BYTES = 48  # 64 characters (RFC 7636: 43..128)
STATE_MAX_CHARS = 128
CODE_MAX_CHARS = 2048
# The scopes of OpenID itself: the ID token and the refresh token. Every other scope is a permission.
OPENID_SCOPES = ("openid", "offline_access")
# A login, consent or logout challenge of the provider as a query value: Hydra's are 1.3-1.6 KB of base64url
# (with `=` padding) that grow with the request; anything else is refused before the provider is asked.
CHALLENGE_PATTERN = re.compile(r"[A-Za-z0-9._~=-]{1,4096}")


def s256(verifier: str) -> str:
    """The PKCE `code_challenge` of `verifier` (RFC 7636 4.2, S256)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class PendingSignIn:
    state: str
    nonce: str
    verifier: str
    started_at: float

    @classmethod
    def start(cls, now: float) -> PendingSignIn:
        return cls(
            secrets.token_urlsafe(STATE_BYTES),
            secrets.token_urlsafe(STATE_BYTES),
            secrets.token_urlsafe(PKCE_VERIFIER_BYTES),
            now,
        )

    @property
    def code_challenge(self) -> str:
        return s256(self.verifier)

    def expired(self, now: float) -> bool:
        return now - self.started_at >= PENDING_SIGN_IN_SECONDS


def still_pending(pending: Sequence[PendingSignIn], now: float) -> tuple[PendingSignIn, ...]:
    """The unexpired sign-ins, newest last, at most `PENDING_SIGN_INS_MAX - 1` (room for one more)."""
    alive = [p for p in pending if not p.expired(now)]
    return tuple(alive[-(PENDING_SIGN_INS_MAX - 1) :])


@dataclass(frozen=True)
class TokenAnswer:
    """A token endpoint's answer (RFC 6749 5.1), checked for shape by the adapter."""

    access_token: str = field(repr=False)
    expires_in: int
    refresh_token: str | None = field(default=None, repr=False)
    id_token: str | None = field(default=None, repr=False)
    scope: str | None = None


@dataclass(frozen=True)
class Tokens:
    """The provider's tokens of one session. `id_token` is kept only for `id_token_hint` at sign-out."""

    access_token: str = field(repr=False)
    refresh_token: str | None = field(repr=False)
    id_token: str = field(repr=False)
    expires_at: float

    def due(self, now: float, margin_seconds: float) -> bool:
        """Whether the access token has less than `margin_seconds` left (then it is refreshed)."""
        return self.expires_at - now < margin_seconds

    def expired(self, now: float) -> bool:
        return self.expires_at <= now


@dataclass(frozen=True)
class SignedIn:
    subject: str
    permissions: frozenset[str]
    tokens: Tokens


def permissions_of(scope: str | None) -> frozenset[str]:
    """The permissions among granted scopes: the values shaped `service:action` (`openid` and
    `offline_access` are not permissions)."""
    return frozenset(s for s in (scope or "").split() if PERMISSION_PATTERN.fullmatch(s))


def granted_permissions(answer: TokenAnswer) -> frozenset[str] | None:
    """The permissions a token answer grants as scopes; None when it does not say (a refresh answer may
    leave `scope` out: the grant is unchanged)."""
    return None if answer.scope is None else permissions_of(answer.scope)


def granted_scopes(requested: Sequence[str], allowed: Iterable[str]) -> list[str]:
    """What a consent grants: the requested scopes that are OpenID's own or that the login allowed, in the
    order requested; never a scope nobody requested."""
    permitted = set(allowed)
    return [s for s in dict.fromkeys(requested) if s in OPENID_SCOPES or s in permitted]


@dataclass(frozen=True)
class AuthorizationRequest:
    """What a sign-in asks the provider for (authorization code with PKCE): where to come back, the
    session's `state`, `nonce` and PKCE challenge, the scopes and the audiences of the access token."""

    redirect_uri: str
    state: str
    nonce: str
    code_challenge: str
    scopes: tuple[str, ...]
    audiences: tuple[str, ...]
