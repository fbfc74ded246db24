"""The console's FastAPI app: identity, sessions, CSRF, rendering and error pages. Pages live in
``pages_operations`` (overview, devices, orphans, audit), ``pages_user`` (inbox, watchers, media) and
``pages_traces`` (a trace's waterfall); signing in and out in ``sign_in``; the provider's login, consent and
logout pages of the local stack in ``dev_login``.

Every page request resolves the user first, from the encrypted session: a user the callback signed in, whose
access token is refreshed here once it is due (`console.service_layer.sign_in`). Without one, or once the
provider refused the refresh, pages redirect to ``/sign-in``. Every POST/PUT/DELETE checks the CSRF token
before anything else. The session is written back by the middleware, whatever the route answered (a page,
a redirect, a stream), so a refreshed token is never lost.
"""

from __future__ import annotations

import enum
import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import httpx
from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from jinja2 import Environment
from prometheus_client import CollectorRegistry, Counter
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException

from console.adapters.apis import PROMETHEUS, ApiError, Apis
from console.adapters.jaeger import JaegerQuery
from console.adapters.login_admin import LoginAdmin
from console.adapters.openid import OpenIdProvider, ProviderUnavailable, claimed_permissions, origin_of
from console.domain.identity import NotPermitted, User
from console.domain.sign_in import granted_permissions
from console.entrypoints.session import CSRF_FIELD, CSRF_HEADER, Session, Sessions, csrf_matches
from console.entrypoints.templating import page_templates
from console.service_layer.sign_in import RefreshOutcome, SessionEnded, SignIns
from console.settings import ConsoleSettings
from yovision_platform.auth import AuthError
from yovision_platform.errors import ConfigError
from yovision_platform.metrics import LabeledMetric, labeled_counter
from yovision_platform.permissions import PERMISSIONS

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parents[1]
VENDOR_FILES = {"htmx.min.js": Path("htmx.org/dist/htmx.min.js")}  # axe-core (npm) is the tests' alone
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


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
    settings: ConsoleSettings
    apis: Apis
    sessions: Sessions
    templates: Environment
    provider: OpenIdProvider
    sign_ins: SignIns
    metrics: SignInMetrics
    login_admin: LoginAdmin | None = None  # the dev login (local stack only)
    jaeger: JaegerQuery | None = None  # CONSOLE_JAEGER_URL: the trace pages and links
    closing: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

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
        return " ".join(["'self'", *sorted(self.provider.origins())])

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


def _install_middleware(app: FastAPI, console: Console) -> None:
    @app.middleware("http")
    async def session_and_csrf(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        request.state.session = console.sessions.load(request)
        response: Response | None = None
        if request.method in STATE_CHANGING:
            presented = request.headers.get(CSRF_HEADER)
            content_type = request.headers.get("content-type", "")
            if presented is None and content_type.startswith(
                ("application/x-www-form-urlencoded", "multipart/form-data")
            ):
                form = await request.form()
                request.state.form = form
                value = form.get(CSRF_FIELD)
                presented = value if isinstance(value, str) else None
            if not csrf_matches(request.state.session, presented):
                response = console.error(request, 403, "csrf_failed")
        if response is None:
            response = await call_next(request)
        console.sessions.store(request, response, request.state.session)
        response.headers.setdefault("Cache-Control", "no-store")
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; img-src 'self' data:; media-src 'self'; style-src 'self'; "
            f"script-src 'self'; frame-ancestors 'none'; form-action {console.form_targets()}; "
            "base-uri 'none'"
        )
        return response


def _install_error_pages(app: FastAPI, console: Console) -> None:
    async def sign_in_required(request: Request, _: Exception) -> Response:
        if request.headers.get("hx-request") == "true":
            # an htmx poll or swap: its XHR would follow a redirect on to the provider (another origin) and
            # fail; htmx sends the whole page to sign in instead
            return Response(status_code=200, headers={"HX-Redirect": "/sign-in"})
        return RedirectResponse("/sign-in", status_code=303)

    async def unauthorized(request: Request, _: Exception) -> Response:
        return console.error(request, 401, "unauthorized")

    async def not_permitted(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, NotPermitted)
        return console.error(request, 403, "forbidden", permission=exc.permission)

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        status = exc.status if exc.status in (400, 401, 403, 404, 409, 422, 429) else 502
        return console.error(request, status, exc.code, service=exc.service)

    async def provider_unavailable(request: Request, _: Exception) -> Response:
        return console.error(request, 503, SignInOutcome.UNAVAILABLE.value)

    app.add_exception_handler(SignInRequired, sign_in_required)
    app.add_exception_handler(AuthError, unauthorized)
    app.add_exception_handler(NotPermitted, not_permitted)
    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(ProviderUnavailable, provider_unavailable)
    for refusal in (HTTPException, RequestValidationError):
        _answer_browsers_with_the_error_page(app, console, refusal)


def _answer_browsers_with_the_error_page(app: FastAPI, console: Console, refusal: type[Exception]) -> None:
    """What the framework refuses before a route runs (an unknown URL, a wrong method, a path parameter
    that is no id) is the platform's problem; a browser asking for a page (``Accept: text/html``) gets it
    as the error page, with the problem's status and code and nothing of the request. Other callers (the
    upload script's fetch, htmx) keep the problem JSON."""
    platform = app.exception_handlers[refusal]

    async def error_page(request: Request, exc: Exception) -> Response:
        answered = platform(request, exc)
        problem = await answered if inspect.isawaitable(answered) else answered
        if "text/html" not in request.headers.get("accept", ""):
            return problem
        code = str(json.loads(bytes(problem.body)).get("code", "error"))
        page = console.error(request, problem.status_code, code)
        if "allow" in problem.headers:
            page.headers["Allow"] = problem.headers["allow"]
        return page

    app.add_exception_handler(refusal, error_page)


def _install_assets(app: FastAPI, console: Console) -> None:
    static_dir = PACKAGE_DIR / "static"

    @app.get("/static/{name}", include_in_schema=False)
    async def static(name: str) -> Response:
        path = static_dir / name
        if name not in {p.name for p in static_dir.iterdir()}:
            return Response(status_code=404)
        return FileResponse(path, headers={"Cache-Control": "public, max-age=300"})

    @app.get("/static/vendor/{name}", include_in_schema=False)
    async def vendor(name: str) -> Response:
        relative = VENDOR_FILES.get(name)
        if relative is None or not (console.settings.assets_dir / relative).is_file():
            return Response(status_code=404)
        return FileResponse(
            console.settings.assets_dir / relative, headers={"Cache-Control": "public, max-age=3600"}
        )


def build_console(settings: ConsoleSettings, registry: CollectorRegistry | None = None) -> Console:
    """The console and its adapters (the composition root's part; `registry` takes its metrics)."""
    if not (settings.assets_dir / VENDOR_FILES["htmx.min.js"]).is_file():
        raise ConfigError(settings.env_var_name("assets_dir"), "missing", "htmx not found: run `make setup`")
    urls = settings.service_urls()
    if settings.prometheus_url is not None:
        urls[PROMETHEUS] = settings.prometheus_url
    apis = Apis(urls=urls, timeout_seconds=settings.api_timeout_seconds)
    http = httpx.AsyncClient(timeout=settings.api_timeout_seconds, follow_redirects=False)
    provider = OpenIdProvider(settings.oidc_issuer, settings.oidc_client_id, settings.client_secret, http)
    metrics = SignInMetrics.register(registry if registry is not None else CollectorRegistry())
    mapping = settings.permission_mapping()
    sign_ins = SignIns(
        provider,
        scopes=PERMISSIONS,
        audiences=settings.oidc_audiences,
        refresh_margin_seconds=settings.refresh_margin_seconds,
        permissions_of=granted_permissions if mapping is None else claimed_permissions(mapping),
        on_refresh=metrics.refreshed,
    )
    login_admin = None
    if settings.dev_login_admin_url is not None:
        login_admin = LoginAdmin(settings.dev_login_admin_url, origin_of(settings.oidc_issuer), http)
    sessions = Sessions(settings.session_key, always_secure=not settings.dev_login)
    console = Console(settings, apis, sessions, page_templates(), provider, sign_ins, metrics, login_admin)
    console.closing += [apis.aclose, provider.aclose, http.aclose]
    if settings.jaeger_url is not None:
        console.jaeger = JaegerQuery(settings.jaeger_url)
        console.closing.append(console.jaeger.aclose)
    return console


def install(app: FastAPI, console: Console) -> None:
    from console.entrypoints import dev_login, pages_operations, pages_traces, pages_user, sign_in

    app.state.console = console
    _install_middleware(app, console)
    _install_error_pages(app, console)
    _install_assets(app, console)
    sign_in.install(app)
    if console.login_admin is not None:
        dev_login.install(app)
    pages_operations.install(app)
    pages_user.install(app)
    pages_traces.install(app)
