"""The console's FastAPI app: identity, sessions, CSRF, rendering and error pages. Pages live in
``pages_operations`` (overview, devices, orphans, audit), ``pages_user`` (inbox, watchers, media) and
``pages_traces`` (a trace's waterfall); signing in and out in ``sign_in``; the provider's login, consent and
logout pages of the local stack in ``dev_login``; static files in ``assets``. Each is a module-level router
`install` includes; what they share (the `Console`, the user dependency, rendering) is in ``dependencies``.

Every page request resolves the user first, from the encrypted session: a user the callback signed in, whose
access token is refreshed here once it is due (`console.service_layer.sign_in`). Without one, or once the
provider refused the refresh, pages redirect to ``/sign-in``. Every POST/PUT/DELETE checks the CSRF token
before anything else. The session is written back by the middleware, whatever the route answered (a page,
a redirect, a stream), so a refreshed token is never lost.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from starlette.exceptions import HTTPException

from console.domain.identity import NotPermitted
from console.entrypoints import assets, dev_login, pages_operations, pages_traces, pages_user, sign_in
from console.entrypoints.dependencies import Console, SignInOutcome, SignInRequired
from console.entrypoints.session import CSRF_FIELD, CSRF_HEADER, csrf_matches
from console.service_layer.ports import ApiError, ProviderUnavailable
from yovision_platform.web import AuthError

log = logging.getLogger(__name__)

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


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


def install(app: FastAPI, console: Console) -> None:
    """The console's middleware, error pages, assets and routers on `app` (the console in its state)."""
    app.state.console = console
    _install_middleware(app, console)
    _install_error_pages(app, console)
    app.include_router(assets.router)
    app.include_router(sign_in.router)
    if console.login_admin is not None:
        app.include_router(dev_login.router)
    for pages in (pages_operations, pages_user, pages_traces):
        app.include_router(pages.router)
