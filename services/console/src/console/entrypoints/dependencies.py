"""What every page and route of the console shares: the `Console` in the app's state (the use cases, the
sessions, rendering), the signed-in user as a dependency, the permission check, the parsed form and the
sign-in metrics. The routes (`pages_*`, `sign_in`, `dev_login`) import this module, never `web`, which
includes their routers."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment
from prometheus_client import CollectorRegistry, Counter
from starlette.datastructures import FormData

from console.adapters.login_admin import LoginAdmin
from console.bootstrap import ConsoleUseCases
from console.domain.identity import NotPermitted, User
from console.entrypoints.session import Session, Sessions
from console.service_layer.sign_in import RefreshOutcome, SessionEnded, SignIns
from console.settings import ConsoleSettings
from yovision_platform.observability import LabeledMetric, labeled_counter


class SignInRequired(Exception):
    pass


class SignInOutcome(enum.Enum):
    """How a sign-in at the callback ended: `signed_in`, or the stable code of the error page it showed."""

    SIGNED_IN = "signed_in"
    STATE_MISMATCH = "sign_in_state_mismatch"
    EXPIRED = "sign_in_expired"
    DENIED = "sign_in_denied"
    REFUSED = "sign_in_refused"
    ID_TOKEN_INVALID = "id_token_invalid"  # noqa: S105 (an error code)
    UNAVAILABLE = "identity_provider_unavailable"
    TOO_LARGE = "session_too_large"


@dataclass(frozen=True)
class SignInMetrics:
    """`console_sign_ins_total{outcome}` and `console_token_refreshes_total{outcome}`."""

    sign_ins: LabeledMetric[Counter]
    refreshes: LabeledMetric[Counter]

    @classmethod
    def register(cls, registry: CollectorRegistry) -> SignInMetrics:
        metrics = cls(
            labeled_counter(
                registry, "console_sign_ins_total", "Sign-ins at the callback, by outcome",
                {"outcome": SignInOutcome},
            ),
            labeled_counter(
                registry, "console_token_refreshes_total",
                "Access tokens refreshed before expiry, by outcome (shared: another request's refresh)",
                {"outcome": RefreshOutcome},
            ),
        )  # fmt: skip
        metrics.sign_ins.initialize_all()
        metrics.refreshes.initialize_all()
        return metrics

    def signed_in(self, outcome: SignInOutcome) -> None:
        self.sign_ins.labels(outcome=outcome).inc()

    def refreshed(self, outcome: RefreshOutcome) -> None:
        self.refreshes.labels(outcome=outcome).inc()


@dataclass
class Console:
    """The app's state: the use cases (`bootstrap`), the sessions and the page templates; `origins`: the
    provider's origins a form may lead to; `closing`: what to close at shutdown."""

    settings: ConsoleSettings
    use_cases: ConsoleUseCases
    sessions: Sessions
    templates: Environment
    origins: Callable[[], frozenset[str]]
    metrics: SignInMetrics
    login_admin: LoginAdmin | None = None  # the dev login (local stack only)
    closing: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    @property
    def sign_ins(self) -> SignIns:
        return self.use_cases.sign_ins

    def render(self, request: Request, name: str, http_status: int = 200, **context: Any) -> HTMLResponse:
        session: Session = request.state.session
        user: User | None = getattr(request.state, "user", None)
        flash, session.flash = session.flash, None
        if flash:
            session.changed = True
        html = self.templates.get_template(name).render(
            request=request, user=user, csrf=session.csrf, flash=flash, path=request.url.path, **context
        )
        return HTMLResponse(html, status_code=http_status)

    def error(
        self,
        request: Request,
        status: int,
        code: str,
        *,
        service: str | None = None,
        permission: str | None = None,
    ) -> HTMLResponse:
        return self.render(
            request, "error.html", status, status=status, code=code, service=service, permission=permission
        )

    def redirect(self, request: Request, url: str, flash: str | None = None) -> RedirectResponse:
        session: Session = request.state.session
        if flash:
            session.flash, session.changed = flash, True
        return RedirectResponse(url, status_code=303)

    def url_of(self, request: Request, path: str) -> str:
        """The console's own URL of `path`, as the browser reaches it (`CONSOLE_PUBLIC_URL`, else the
        request's): the callback and post-logout URLs registered at the provider."""
        base = self.settings.public_url or str(request.base_url).rstrip("/")
        return base + path

    def form_targets(self) -> str:
        """`form-action` sources: the console, and the provider a form's redirect leads to (the dev
        login's accepted login, sign-out's RP-initiated logout)."""
        return " ".join(["'self'", *sorted(self.origins())])

    async def aclose(self) -> None:
        for close in self.closing:
            await close()


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


async def current_user(request: Request) -> User:
    """The signed-in user, the access token refreshed when due (a refreshed session is written back)."""
    console = console_of(request)
    session: Session = request.state.session
    if session.user is None:
        raise SignInRequired()
    try:
        fresh = await console.sign_ins.fresh(session.user)
    except SessionEnded:
        request.state.session = Session(changed=True)
        raise SignInRequired() from None
    if fresh is not session.user:
        session.user, session.changed = fresh, True
    user = User(fresh.subject, fresh.permissions, fresh.tokens.access_token)
    request.state.user = user
    return user


CurrentUser = Annotated[User, Depends(current_user)]
ConsoleDep = Annotated[Console, Depends(console_of)]


def require(user: User, permission: str) -> None:
    if not user.may(permission):
        raise NotPermitted(permission)


async def form_of(request: Request) -> FormData:
    """The parsed form (read once: by the CSRF check, or here when the token came as a header)."""
    form: FormData | None = getattr(request.state, "form", None)
    if form is None:
        form = await request.form()
        request.state.form = form
    return form
