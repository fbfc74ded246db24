"""Signing users in and out at the OpenID provider, and keeping their access tokens fresh.

Sign-in (`start`, then `finish` at the callback): authorization code with PKCE (S256), `state` and `nonce`;
the code is exchanged with the client's secret, the ID token verified (its `sub` is the user), the granted
scopes are the permissions. Sign-out (`sign_out`): the refresh token is revoked, and the provider's
end-session URL (RP-initiated logout, `id_token_hint`, `state`) ends its own session.

Refresh (`fresh`): once the access token has less than the margin left, the refresh token buys a new set.
The provider rotates refresh tokens and takes the reuse of a used one as theft (Hydra revokes the whole
chain, and the user is signed out), while a browser sends several requests at once with the same cookie. So:

- one refresh per refresh token at a time in the process: concurrent requests wait for the one under way
  and share its answer (a waiter that gives up does not cancel it);
- the answer is remembered under the used token for `SUCCESSOR_MEMORY_SECONDS`: a request that still
  carries the old cookie (sent before the new one arrived, or whose answer was lost) gets the new set, never
  a second use of the old token;
- a refusal (`invalid_grant`: revoked, expired, reused) ends the session (`SessionEnded`); a provider that
  does not answer leaves a still valid token in use and is asked again on the next request.

Sign-out ends the session for every copy of its cookie this process sees: the refresh tokens of a signed-out
chain are remembered (as digests, for `SUCCESSOR_MEMORY_SECONDS`), and a cookie of that chain is a
`SessionEnded` at once, not a session whose access token still works until it expires.

Several console processes (replicas) do not share this memory: that is what the provider's rotation grace
period is for (docs/services/console.md).
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from console.domain.sign_in import (
    OPENID_SCOPES,
    AuthorizationRequest,
    PendingSignIn,
    SignedIn,
    TokenAnswer,
    Tokens,
    granted_permissions,
)
from console.service_layer.ports import GrantRefused, IdTokenInvalid, Provider, ProviderUnavailable
from yovision_platform.web import SUBJECT_PATTERN

__all__ = ["RefreshOutcome", "SessionEnded", "SignIns"]

SUCCESSOR_MEMORY_SECONDS = 900.0  # an access token's life at the local provider
SUCCESSOR_MEMORY_MAX = 10_000
LOGOUT_STATE_BYTES = 16

log = logging.getLogger(__name__)


class SessionEnded(Exception):
    """The provider refused the session's refresh token: the user signs in again."""


class RefreshOutcome(enum.Enum):
    REFRESHED = "refreshed"  # this request asked the provider
    SHARED = "shared"  # it got the answer of another request's refresh
    REFUSED = "refused"  # the provider refused the refresh token: the session ended
    FAILED = "failed"  # the provider did not answer


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass
class SignIns:
    """See the module docstring. `scopes`: what a sign-in asks for beyond `openid offline_access` (the
    permissions); `audiences`: the services its access token is for; `permissions_of`: the permissions a
    token answer grants (None: it does not say); `clock`: wall-clock seconds."""

    provider: Provider
    scopes: Sequence[str]
    audiences: Sequence[str]
    refresh_margin_seconds: float
    permissions_of: Callable[[TokenAnswer], frozenset[str] | None] = granted_permissions
    clock: Callable[[], float] = time.time
    on_refresh: Callable[[RefreshOutcome], None] = lambda outcome: None
    _running: dict[bytes, asyncio.Task[SignedIn]] = field(default_factory=dict, init=False)
    _successors: OrderedDict[bytes, tuple[SignedIn, float]] = field(default_factory=OrderedDict, init=False)
    _signed_out: OrderedDict[bytes, float] = field(default_factory=OrderedDict, init=False)

    # --- signing in --------------------------------------------------------------------------------------

    async def start(self, redirect_uri: str) -> tuple[PendingSignIn, str]:
        """A new sign-in (kept in the session by the caller) and the provider's URL to send the browser to."""
        pending = PendingSignIn.start(self.clock())
        url = await self.provider.authorization_url(
            AuthorizationRequest(
                redirect_uri=redirect_uri,
                state=pending.state,
                nonce=pending.nonce,
                code_challenge=pending.code_challenge,
                scopes=(*OPENID_SCOPES, *self.scopes),
                audiences=tuple(self.audiences),
            )
        )
        return pending, url

    async def finish(self, pending: PendingSignIn, code: str, redirect_uri: str) -> SignedIn:
        """Exchanges the code of `pending`'s sign-in. GrantRefused, IdTokenInvalid, ProviderUnavailable."""
        answer = await self.provider.exchange_code(code, redirect_uri=redirect_uri, verifier=pending.verifier)
        if answer.id_token is None:
            raise IdTokenInvalid()
        claims = await self.provider.verify_id_token(answer.id_token, nonce=pending.nonce)
        subject = claims.get("sub")
        if not isinstance(subject, str) or SUBJECT_PATTERN.fullmatch(subject) is None:
            raise IdTokenInvalid()  # the adapter checks it too
        permissions = self.permissions_of(answer) or frozenset()
        return SignedIn(subject, permissions, self._tokens(answer, answer.id_token, None))

    def _tokens(self, answer: TokenAnswer, id_token: str, previous_refresh: str | None) -> Tokens:
        return Tokens(
            answer.access_token,
            answer.refresh_token or previous_refresh,
            id_token,
            self.clock() + answer.expires_in,
        )

    # --- staying signed in ---------------------------------------------------------------------------------

    async def fresh(self, signed_in: SignedIn) -> SignedIn:
        """`signed_in`, or what its refresh token was (or is now) exchanged for once its access token is due
        (see the module docstring). SessionEnded when the provider refuses; ProviderUnavailable when it
        does not answer and the access token has expired."""
        latest = self._latest(signed_in)
        now = self.clock()
        if not latest.tokens.due(now, self.refresh_margin_seconds):
            if latest is not signed_in:
                self.on_refresh(RefreshOutcome.SHARED)
            return latest
        refresh_token = latest.tokens.refresh_token
        if refresh_token is None:
            if latest.tokens.expired(now):
                raise SessionEnded()
            return latest
        key = _digest(refresh_token)
        task = self._running.get(key)
        if task is None:
            task = asyncio.create_task(self._refresh(latest, refresh_token, key))
            self._running[key] = task
            task.add_done_callback(lambda done: self._settled(key, done))
        else:
            self.on_refresh(RefreshOutcome.SHARED)
        try:
            return await asyncio.shield(task)
        except ProviderUnavailable:
            if latest.tokens.expired(self.clock()):
                raise
            return latest

    def _settled(self, key: bytes, task: asyncio.Task[SignedIn]) -> None:
        self._running.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved: every waiter may have gone (their requests ended)

    async def _refresh(self, current: SignedIn, refresh_token: str, key: bytes) -> SignedIn:
        try:
            answer = await self.provider.refresh(refresh_token)
        except GrantRefused as refused:
            self.on_refresh(RefreshOutcome.REFUSED)
            log.info("token_refresh_refused", extra={"code": refused.code})
            raise SessionEnded() from None
        except ProviderUnavailable:
            self.on_refresh(RefreshOutcome.FAILED)
            log.warning("token_refresh_failed")
            raise
        granted = self.permissions_of(answer)
        permissions = current.permissions if granted is None else granted
        renewed = SignedIn(
            current.subject, permissions, self._tokens(answer, current.tokens.id_token, refresh_token)
        )
        self._remember(key, renewed)
        self.on_refresh(RefreshOutcome.REFRESHED)
        return renewed

    def _latest(self, signed_in: SignedIn) -> SignedIn:
        """The newest set the session's refresh token led to (itself when it was never used here)."""
        self._forget_old()
        latest = signed_in
        for _ in range(SUCCESSOR_MEMORY_MAX):
            token = latest.tokens.refresh_token
            if token is None:
                return latest
            key = _digest(token)
            if key in self._signed_out:
                raise SessionEnded()
            found = self._successors.get(key)
            if found is None:
                return latest
            latest = found[0]
        return latest

    def _remember(self, key: bytes, renewed: SignedIn) -> None:
        self._successors[key] = (renewed, self.clock())
        self._successors.move_to_end(key)
        while len(self._successors) > SUCCESSOR_MEMORY_MAX:
            self._successors.popitem(last=False)

    def _forget_old(self) -> None:
        horizon = self.clock() - SUCCESSOR_MEMORY_SECONDS
        while self._successors:
            key, (_, stored_at) = next(iter(self._successors.items()))
            if stored_at >= horizon:
                break
            del self._successors[key]
        while self._signed_out and next(iter(self._signed_out.values())) < horizon:
            self._signed_out.popitem(last=False)

    # --- signing out ---------------------------------------------------------------------------------------

    def _end_chain(self, signed_in: SignedIn) -> None:
        """Every refresh token from the cookie's to the newest, as signed out."""
        now = self.clock()
        latest: SignedIn | None = signed_in
        for _ in range(SUCCESSOR_MEMORY_MAX):
            token = latest.tokens.refresh_token if latest is not None else None
            if token is None:
                break
            key = _digest(token)
            self._signed_out[key] = now
            self._signed_out.move_to_end(key)
            found = self._successors.get(key)
            latest = found[0] if found is not None else None
        while len(self._signed_out) > SUCCESSOR_MEMORY_MAX:
            self._signed_out.popitem(last=False)

    async def sign_out(self, signed_in: SignedIn, post_logout_redirect_uri: str) -> str | None:
        """Revokes the session's (newest) refresh token at the provider and returns its end-session URL
        (None when it has none). A revocation the provider does not confirm is logged, not fatal: the user
        is signed out of the console either way."""
        try:
            latest = self._latest(signed_in)
        except SessionEnded:
            return None  # signed out already (another tab, or a stale copy of the cookie)
        self._end_chain(signed_in)
        if latest.tokens.refresh_token is not None:
            try:
                revoked = await self.provider.revoke(latest.tokens.refresh_token)
            except ProviderUnavailable:
                revoked = False
            if not revoked:
                log.warning("refresh_token_not_revoked")
        return await self.provider.end_session_url(
            id_token_hint=latest.tokens.id_token,
            post_logout_redirect_uri=post_logout_redirect_uri,
            state=secrets.token_urlsafe(LOGOUT_STATE_BYTES),
        )
