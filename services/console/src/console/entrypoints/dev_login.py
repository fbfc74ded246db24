"""The local stack's login, consent and logout pages of the OpenID provider (ORY Hydra sends the browser
here: `URLS_LOGIN`, `URLS_CONSENT`, `URLS_LOGOUT`). Installed only with `CONSOLE_DEV_LOGIN_ADMIN_URL`
(loopback only, never in production, where the provider uses the organisation's own login).

- `/oidc/login?login_challenge=…`: pick a user id and permissions. The login is accepted as that user,
  remembered by the provider (so sign-out has a provider session to end), with the chosen permissions in
  the login's context. When the provider already remembers this browser's login it fixes the subject: the
  page then shows it and asks only for the permissions.
- `/oidc/consent?consent_challenge=…`: grants exactly the requested scopes the login allowed (plus `openid`
  and `offline_access`) and the requested audiences, without a page.
- `/oidc/logout?logout_challenge=…`: accepts the logout (the provider ends its session).

A challenge is checked (`CHALLENGE_PATTERN`) before the provider is asked, and never put in a page: the
login page's challenge waits in the encrypted session until the form is sent.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from console.adapters.login_admin import ChallengeRefused, LoginAdmin
from console.domain.sign_in import CHALLENGE_PATTERN, OPENID_SCOPES, granted_scopes
from console.entrypoints.dependencies import Console, ConsoleDep, form_of
from console.entrypoints.session import SESSION_MAX_AGE_SECONDS, SUBJECT_MAX_CHARS, LoginInProgress, Session
from yovision_platform.web import PERMISSION_PATTERN, PERMISSIONS, SUBJECT_PATTERN

router = APIRouter(include_in_schema=False)


def _admin(console: Console) -> LoginAdmin:
    assert console.login_admin is not None  # installed only with the dev login
    return console.login_admin


def _challenge(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    return value if value is not None and CHALLENGE_PATTERN.fullmatch(value) else None


def _login_page(
    request: Request,
    console: Console,
    http_status: int = 200,
    *,
    fixed_subject: str | None,
    error: str | None = None,
    chosen: tuple[str, ...] = (),
) -> Response:
    return console.render(
        request, "login.html", http_status, permissions=PERMISSIONS, fixed_subject=fixed_subject,
        error=error, chosen=chosen,
    )  # fmt: skip


@router.get("/oidc/login")
async def login_page(request: Request, console: ConsoleDep) -> Response:
    challenge = _challenge(request, "login_challenge")
    if challenge is None:
        return console.error(request, 400, "invalid_challenge")
    try:
        asked = await _admin(console).login_request(challenge)
    except ChallengeRefused:
        return console.error(request, 400, "challenge_refused")
    fixed = asked.subject if asked.skip and SUBJECT_PATTERN.fullmatch(asked.subject) else None
    session: Session = request.state.session
    session.login, session.changed = LoginInProgress(challenge, fixed), True
    return _login_page(request, console, fixed_subject=fixed)


@router.post("/oidc/login")
async def login(request: Request, console: ConsoleDep) -> Response:
    session: Session = request.state.session
    login = session.login
    if login is None:
        return console.error(request, 400, "no_login_in_progress")
    form = await form_of(request)
    subject = login.subject or str(form.get("subject", "")).strip()
    chosen = tuple(dict.fromkeys(str(p) for p in form.getlist("permission")))
    if (
        len(subject) > SUBJECT_MAX_CHARS
        or SUBJECT_PATTERN.fullmatch(subject) is None
        or not all(PERMISSION_PATTERN.fullmatch(p) and p in PERMISSIONS for p in chosen)
    ):
        return _login_page(
            request, console, 422, fixed_subject=login.subject, error="invalid_subject", chosen=chosen
        )
    try:
        target = await _admin(console).accept_login(
            login.challenge, subject, chosen, remember_seconds=SESSION_MAX_AGE_SECONDS
        )
    except ChallengeRefused:
        return console.error(request, 400, "challenge_refused")
    finally:
        session.login, session.changed = None, True
    return RedirectResponse(target, status_code=303)


@router.get("/oidc/consent")
async def consent(request: Request, console: ConsoleDep) -> Response:
    challenge = _challenge(request, "consent_challenge")
    if challenge is None:
        return console.error(request, 400, "invalid_challenge")
    admin = _admin(console)
    try:
        asked = await admin.consent_request(challenge)
        granted = granted_scopes(asked.requested_scope, asked.allowed_permissions - set(OPENID_SCOPES))
        target = await admin.accept_consent(challenge, granted, asked.requested_audiences)
    except ChallengeRefused:
        return console.error(request, 400, "challenge_refused")
    return RedirectResponse(target, status_code=303)


@router.get("/oidc/logout")
async def logout(request: Request, console: ConsoleDep) -> Response:
    challenge = _challenge(request, "logout_challenge")
    if challenge is None:
        return console.error(request, 400, "invalid_challenge")
    try:
        target = await _admin(console).accept_logout(challenge)
    except ChallengeRefused:
        return console.error(request, 400, "challenge_refused")
    return RedirectResponse(target, status_code=303)
