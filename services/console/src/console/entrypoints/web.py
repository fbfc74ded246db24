"""The console's FastAPI app: identity, sessions, CSRF, rendering and error pages. Pages live in
``pages_operations`` (overview, devices, orphans, audit) and ``pages_user`` (inbox, watchers, media).

Every page request resolves the user first: the forwarded bearer token (production) or the signed session
of a dev sign-in. Without one, pages redirect to ``/sign-in`` (dev) or answer 401 (production: the proxy
should never let such a request through). Every POST/PUT/DELETE checks the CSRF token before anything else.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from jinja2 import Environment
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException

from console.adapters.apis import ApiError, Apis
from console.domain.identity import PERMISSIONS, NotPermitted, User
from console.entrypoints.session import (
    CSRF_FIELD,
    CSRF_HEADER,
    SUBJECT_MAX_CHARS,
    Session,
    Sessions,
    csrf_matches,
)
from console.entrypoints.templating import page_templates
from console.settings import ConsoleSettings
from yovision_platform.auth import PERMISSION_PATTERN, SUBJECT_PATTERN, AuthError
from yovision_platform.errors import ConfigError

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parents[1]
VENDOR_FILES = {"htmx.min.js": Path("htmx.org/dist/htmx.min.js")}  # axe-core (npm) is the tests' alone
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class CsrfFailed(Exception):
    pass


class SignInRequired(Exception):
    pass


@dataclass
class Console:
    settings: ConsoleSettings
    apis: Apis
    sessions: Sessions
    templates: Environment

    def render(self, request: Request, name: str, http_status: int = 200, **context: Any) -> HTMLResponse:
        session: Session = request.state.session
        user: User | None = getattr(request.state, "user", None)
        flash, session.flash = session.flash, None
        if flash:
            session.changed = True
        html = self.templates.get_template(name).render(
            request=request,
            user=user,
            csrf=session.csrf,
            flash=flash,
            dev_sign_in=self.settings.dev_sign_in,
            path=request.url.path,
            **context,
        )
        response = HTMLResponse(html, status_code=http_status)
        self.sessions.store(request, response, session)
        return response

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
        response = RedirectResponse(url, status_code=303)
        self.sessions.store(request, response, session)
        return response


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def current_user(request: Request) -> User:
    console = console_of(request)
    session: Session = request.state.session
    if console.settings.verifier is not None:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError()
        identity = console.settings.verifier.verify(token.strip())
        if session.subject != identity.subject:  # a new user behind the proxy: a new CSRF token
            fresh = Session(subject=identity.subject, changed=True)
            request.state.session = fresh
        user = User(identity.subject, identity.permissions, token=token.strip())
    elif session.subject is None:
        raise SignInRequired()
    else:
        user = User(session.subject, frozenset(session.permissions))
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
                refused: Response = console.error(request, 403, "csrf_failed")
                return refused
        response = await call_next(request)
        response.headers.setdefault("Cache-Control", "no-store")
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; img-src 'self' data:; media-src 'self'; style-src 'self'; "
            "script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
        )
        return response


def _install_error_pages(app: FastAPI, console: Console) -> None:
    async def sign_in_required(request: Request, _: Exception) -> Response:
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

    app.add_exception_handler(SignInRequired, sign_in_required)
    app.add_exception_handler(AuthError, unauthorized)
    app.add_exception_handler(NotPermitted, not_permitted)
    app.add_exception_handler(ApiError, api_error)
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


def _install_sign_in(app: FastAPI, console: Console) -> None:
    @app.get("/sign-in", response_class=HTMLResponse, include_in_schema=False)
    async def sign_in_page(request: Request) -> Response:
        if not console.settings.dev_sign_in:
            return console.error(request, 404, "not_found")
        return console.render(request, "sign_in.html", permissions=PERMISSIONS, error=None, chosen=())

    @app.post("/sign-in", include_in_schema=False)
    async def sign_in(request: Request) -> Response:
        if not console.settings.dev_sign_in:
            return console.error(request, 404, "not_found")
        form = await form_of(request)
        subject = str(form.get("subject", "")).strip()
        chosen = [str(p) for p in form.getlist("permission")]
        if (
            len(subject) > SUBJECT_MAX_CHARS
            or SUBJECT_PATTERN.fullmatch(subject) is None
            or not all(PERMISSION_PATTERN.fullmatch(p) for p in chosen)
        ):
            return console.render(
                request, "sign_in.html", 422, permissions=PERMISSIONS, error="invalid_subject", chosen=chosen
            )
        # A new session (new CSRF token) for the signed-in user: nothing of the anonymous one carries over.
        request.state.session = Session(subject=subject, permissions=tuple(sorted(set(chosen))), changed=True)
        return console.redirect(request, "/", flash=f"Signed in as {subject}")

    @app.post("/sign-out", include_in_schema=False)
    async def sign_out(request: Request) -> Response:
        request.state.session = Session(changed=True)
        return console.redirect(request, "/sign-in" if console.settings.dev_sign_in else "/")


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


def build_console(settings: ConsoleSettings) -> Console:
    if not (settings.assets_dir / VENDOR_FILES["htmx.min.js"]).is_file():
        raise ConfigError(settings.env_var_name("assets_dir"), "missing", "htmx not found: run `make setup`")
    apis = Apis(
        urls=settings.service_urls(),
        sense_token=settings.sense_token,
        dev_minters=settings.dev_minters,
        timeout_seconds=settings.api_timeout_seconds,
    )
    sessions = Sessions(settings.session_key, always_secure=settings.verifier is not None)
    return Console(settings, apis, sessions, page_templates())


def install(app: FastAPI, console: Console) -> None:
    from console.entrypoints import pages_operations, pages_user

    app.state.console = console
    _install_middleware(app, console)
    _install_error_pages(app, console)
    _install_sign_in(app, console)
    _install_assets(app, console)
    pages_operations.install(app)
    pages_user.install(app)
