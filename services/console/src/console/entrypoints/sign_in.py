"""Signing in and out: `/sign-in` sends the browser to the provider, `/oidc/callback` takes it back and
starts the session, `POST /sign-out` ends it at the console and at the provider, `/oidc/error` is where the
provider sends a browser whose request it refused.

The callback's refusals are the console's error page with a stable code (`SignInOutcome`), never anything
of the request: a `state` of no sign-in of this session (`sign_in_state_mismatch`), a sign-in older than 10
minutes (`sign_in_expired`), the provider's refusal to sign the user in (`sign_in_denied`), the code
refused at the token endpoint (`sign_in_refused`), an ID token that fails a check (`id_token_invalid`), the
provider unreachable (`identity_provider_unavailable`).
"""

from __future__ import annotations

import hmac
import logging

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from console.domain.sign_in import CODE_MAX_CHARS, STATE_MAX_CHARS, PendingSignIn, still_pending
from console.entrypoints.dependencies import ConsoleDep, SignInOutcome
from console.entrypoints.session import Session
from console.service_layer.ports import GrantRefused, IdTokenInvalid, ProviderUnavailable

router = APIRouter(include_in_schema=False)
CALLBACK_PATH = "/oidc/callback"
ERROR_STATUS = {
    SignInOutcome.STATE_MISMATCH: 400,
    SignInOutcome.EXPIRED: 400,
    SignInOutcome.DENIED: 403,
    SignInOutcome.REFUSED: 400,
    SignInOutcome.ID_TOKEN_INVALID: 400,
    SignInOutcome.UNAVAILABLE: 503,
    SignInOutcome.TOO_LARGE: 500,
}

log = logging.getLogger(__name__)


@router.get("/sign-in")
async def sign_in(request: Request, console: ConsoleDep) -> Response:
    session: Session = request.state.session
    if session.user is not None:
        return RedirectResponse("/", status_code=303)
    pending, url = await console.sign_ins.start(console.url_of(request, CALLBACK_PATH))
    session.pending = (*still_pending(session.pending, pending.started_at), pending)
    session.changed = True
    return RedirectResponse(url, status_code=303)


def _pending_of(session: Session, state: str | None) -> PendingSignIn | None:
    if not state or len(state) > STATE_MAX_CHARS:
        return None
    for pending in session.pending:
        if hmac.compare_digest(pending.state.encode(), state.encode()):
            return pending
    return None


@router.get("/oidc/callback")  # CALLBACK_PATH
async def callback(request: Request, console: ConsoleDep) -> Response:
    session: Session = request.state.session
    query = request.query_params
    pending = _pending_of(session, query.get("state"))
    outcome: SignInOutcome | None = None
    if pending is None:
        outcome = SignInOutcome.STATE_MISMATCH
    else:
        session.pending, session.changed = tuple(p for p in session.pending if p is not pending), True
        code = query.get("code")
        if pending.expired(console.sign_ins.clock()):
            outcome = SignInOutcome.EXPIRED
        elif "error" in query:
            outcome = SignInOutcome.DENIED
        elif not code or len(code) > CODE_MAX_CHARS:
            outcome = SignInOutcome.REFUSED
        else:
            try:
                signed_in = await console.sign_ins.finish(
                    pending, code, console.url_of(request, CALLBACK_PATH)
                )
            except GrantRefused as refused:
                log.info("sign_in_refused", extra={"code": refused.code})
                outcome = SignInOutcome.REFUSED
            except IdTokenInvalid:
                outcome = SignInOutcome.ID_TOKEN_INVALID
            except ProviderUnavailable:
                outcome = SignInOutcome.UNAVAILABLE
            else:
                # A new session (a new CSRF token): nothing of the anonymous one carries over.
                fresh = Session(user=signed_in, flash=f"Signed in as {signed_in.subject}", changed=True)
                if console.sessions.fits(fresh):
                    request.state.session = fresh
                    console.metrics.signed_in(SignInOutcome.SIGNED_IN)
                    return RedirectResponse("/", status_code=303)
                outcome = SignInOutcome.TOO_LARGE
    console.metrics.signed_in(outcome)
    return console.error(request, ERROR_STATUS[outcome], outcome.value)


@router.get("/oidc/error")
async def provider_error(request: Request, console: ConsoleDep) -> Response:
    """The provider refused a request of the browser (it says why in the query, which is not shown)."""
    return console.error(request, 400, "identity_provider_error")


@router.post("/sign-out")
async def sign_out(request: Request, console: ConsoleDep) -> Response:
    """CSRF-checked like every POST. Revokes the refresh token, deletes the session's cookies and sends the
    browser to the provider's RP-initiated logout, which ends its session and sends it back to `/`."""
    session: Session = request.state.session
    target: str | None = None
    if session.user is not None:
        try:
            target = await console.sign_ins.sign_out(session.user, console.url_of(request, "/"))
        except ProviderUnavailable:
            target = None
    request.state.session = Session(changed=True, ended=True)
    return RedirectResponse(target or "/", status_code=303)
