"""HTTP API: `/v1/signal-watchers` (the caller's own watchers) and `/v1/admin/signal-watchers` (read-only,
permission `signal:read`).

Identity is the `sub` of a verified JWT (audience `signal-watcher`). Every user query filters by it: a
watcher of another user is `404 not_found`, never 403. Errors are problem details with a stable `code`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi.responses import JSONResponse

from signal_watcher.adapters.probe_client import ProbeClient, ProbeFailed
from signal_watcher.adapters.repository import Position, WatcherRecord, WatcherRepository
from signal_watcher.domain.errors import TargetForbidden, ValidationFailed
from signal_watcher.domain.masking import MASK, is_sensitive_key
from signal_watcher.domain.model import Header, Method, Status, WatcherSpec, resets_baseline
from signal_watcher.domain.ssrf import AddressGuard
from signal_watcher.entrypoints.api_models import (
    AdminWatcherPage,
    CheckOut,
    CheckPage,
    StatusIn,
    TestResultOut,
    WatcherAdminOut,
    WatcherIn,
    WatcherOut,
    WatcherPage,
)
from signal_watcher.service_layer.checks import probe_and_judge
from yovision_platform.auth import BearerToken, Identity, TokenVerifier
from yovision_platform.db import DbConnection
from yovision_platform.encryption import SecretUnreadable
from yovision_platform.errors import PlatformError
from yovision_platform.paging import InvalidCursor, cursor_query, decode_cursor, encode_cursor
from yovision_platform.problems import problem_response
from yovision_platform.web import create_app, exclusive_parameters

__all__ = ["ADMIN_PERMISSION", "PAGE_MAX_ITEMS", "ApiDeps", "install_api", "openapi_document"]

ADMIN_PERMISSION = "signal:read"
CHECK_NOW_MIN_SPACING_SECONDS = 5
PAGE_MAX_ITEMS = 100
PAGE_DEFAULT_ITEMS = 50


@dataclass(frozen=True)
class ApiDeps:
    pool: asyncpg.Pool
    repo: WatcherRepository
    probe: ProbeClient
    verifier: TokenVerifier
    max_watchers_per_user: int
    check_requested: Callable[[], None] = lambda: None  # wakes this instance's scheduler


class NotFound(PlatformError):
    code = "not_found"


class LimitReached(PlatformError):
    code = "watcher_limit_reached"


class NotActive(PlatformError):
    code = "watcher_not_active"


class CheckTooSoon(PlatformError):
    code = "check_too_soon"


class BadCursor(PlatformError):
    code = "invalid_cursor"


class CursorWithOffset(PlatformError):
    code = "cursor_with_offset"


class StoredBodyNeedsPost(PlatformError):
    """An update to a method other than POST that leaves out `body` keeps the stored body, which only POST
    may carry: a conflict with the watcher's state (send `"body": null` to drop it)."""

    code = "stored_body_requires_post"


def _caller(request: Request, token: BearerToken) -> Identity:
    verifier: TokenVerifier = request.app.state.signal_token_verifier
    return verifier.verify(token)


Caller = Annotated[Identity, Depends(_caller)]
Limit = Annotated[int, Query(ge=1, le=PAGE_MAX_ITEMS)]
Offset = Annotated[
    int, Query(ge=0, le=1_000_000, description="Deprecated (kept for old clients): use `cursor`.")
]
Cursor = Annotated[
    str | None,
    cursor_query(uuid.UUID, description="`next_cursor` of the previous page; not with `offset`."),
]
Responses = dict[int | str, dict[str, Any]]
PAGING_ERRORS: Responses = {
    400: {"description": "invalid_cursor; cursor_with_offset: `cursor` with a non-zero `offset`."}
}
PAGING_RULES = exclusive_parameters("cursor", "offset", code="cursor_with_offset")
NOT_FOUND: Responses = {404: {"description": "not_found: the caller has no watcher with this id."}}
SSRF_REFUSED: Responses = {403: {"description": "ssrf_*: the SSRF policy refuses the URL's host or address."}}


def _position(cursor: str | None, offset: int) -> Position | None:
    if cursor is None:
        return None
    if offset:
        raise CursorWithOffset()
    try:
        return decode_cursor(cursor, uuid.UUID)
    except InvalidCursor:
        raise BadCursor() from None


def _next_cursor(rows: list[Any], limit: int, moment: Callable[[Any], datetime]) -> str | None:
    """The cursor after the page's last row when one more row than `limit` was fetched, else None."""
    return encode_cursor(moment(rows[limit - 1]), rows[limit - 1].id) if len(rows) > limit else None


def _spec_of(
    body: WatcherIn, previous: WatcherSpec | None, body_sent: bool, guard: AddressGuard
) -> WatcherSpec:
    stored = {h.key.lower(): h.value for h in previous.headers} if previous else {}
    headers = tuple(
        Header(h.key, stored[h.key.lower()])
        if h.value == MASK and is_sensitive_key(h.key) and h.key.lower() in stored
        else Header(h.key, h.value)
        for h in body.headers
    )
    return WatcherSpec(
        name=body.name,
        agent_id=body.agent_id,
        url=body.url.strip(),
        method=body.method,
        headers=headers,
        body=body.body if body_sent or previous is None else previous.body,
        interval_minutes=body.interval_minutes,
        compare_mode=body.compare_mode,
        json_path=body.json_path,
        prompt_template=body.prompt_template,
    ).validated(guard)


async def _preflight(probe: ProbeClient, url: str) -> None:
    """Refuse a name that resolves to a blocked address now; a name that does not resolve yet is allowed
    (its probes fail with `dns`), and every probe checks again at connect time."""
    try:
        await probe.preflight(url)
    except ProbeFailed as exc:
        if exc.code == "ssrf_blocked":
            raise TargetForbidden("ssrf_blocked_address") from None


def install_api(app: FastAPI, deps: ApiDeps) -> None:

    async def handle_platform_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, PlatformError)
        # SecretUnreadable: the watcher's stored secrets cannot be decrypted with the configured key ring
        # (an operator problem, docs/runbooks/rotating-keys.md): 500 with its stable code, never the value.
        status = {
            NotFound: 404,
            LimitReached: 409,
            NotActive: 409,
            StoredBodyNeedsPost: 409,
            CheckTooSoon: 429,
            BadCursor: 400,
            CursorWithOffset: 400,
            TargetForbidden: 403,
        }.get(type(exc), 422 if isinstance(exc, ValidationFailed) else 500)
        headers = (
            {"Retry-After": str(CHECK_NOW_MIN_SPACING_SECONDS)} if isinstance(exc, CheckTooSoon) else None
        )
        return problem_response(status, exc.code, headers=headers)

    for error in (
        NotFound,
        LimitReached,
        NotActive,
        CheckTooSoon,
        BadCursor,
        CursorWithOffset,
        StoredBodyNeedsPost,
        ValidationFailed,
        TargetForbidden,
        SecretUnreadable,
    ):
        app.add_exception_handler(error, handle_platform_error)

    app.state.signal_token_verifier = deps.verifier
    router = APIRouter(prefix="/v1")

    async def owned(conn: DbConnection, caller: Identity, watcher_id: uuid.UUID) -> WatcherRecord:
        record = await deps.repo.get(conn, caller.subject, watcher_id)
        if record is None:
            raise NotFound()
        return record

    @router.get(
        "/signal-watchers", response_model=WatcherPage, responses=PAGING_ERRORS, openapi_extra=PAGING_RULES
    )
    async def list_watchers(
        caller: Caller, limit: Limit = PAGE_DEFAULT_ITEMS, offset: Offset = 0, cursor: Cursor = None
    ) -> WatcherPage:
        """The caller's watchers, oldest first, keyset-paged (`next_cursor`)."""
        after = _position(cursor, offset)
        async with deps.pool.acquire() as conn:
            records = await deps.repo.list_for_user(
                conn, caller.subject, limit=limit + 1, offset=offset, after=after
            )
        return WatcherPage(
            items=[WatcherOut.of(r) for r in records[:limit]],
            limit=limit,
            offset=offset,
            next_cursor=_next_cursor(records, limit, lambda r: r.created_at),
        )

    @router.post(
        "/signal-watchers",
        response_model=WatcherOut,
        status_code=201,
        responses={**SSRF_REFUSED, 409: {"description": "watcher_limit_reached"}},
    )
    async def create_watcher(caller: Caller, body: WatcherIn) -> WatcherOut:
        spec = _spec_of(body, None, True, deps.probe.guard)
        await _preflight(deps.probe, spec.url)
        async with deps.pool.acquire() as conn, conn.transaction():
            await deps.repo.lock_user(conn, caller.subject)
            if await deps.repo.count_for_user(conn, caller.subject) >= deps.max_watchers_per_user:
                raise LimitReached()
            record = await deps.repo.insert(conn, caller.subject, spec)
        return WatcherOut.of(record)

    @router.get("/signal-watchers/{watcher_id}", response_model=WatcherOut, responses=NOT_FOUND)
    async def get_watcher(caller: Caller, watcher_id: uuid.UUID) -> WatcherOut:
        async with deps.pool.acquire() as conn:
            return WatcherOut.of(await owned(conn, caller, watcher_id))

    @router.put(
        "/signal-watchers/{watcher_id}",
        response_model=WatcherOut,
        responses={
            **NOT_FOUND,
            **SSRF_REFUSED,
            409: {"description": "stored_body_requires_post: the kept body needs POST; send `body: null`"},
        },
    )
    async def update_watcher(caller: Caller, watcher_id: uuid.UUID, body: WatcherIn) -> WatcherOut:
        async with deps.pool.acquire() as conn:
            previous = (await owned(conn, caller, watcher_id)).spec
        if (
            "body" not in body.model_fields_set
            and previous.body is not None
            and body.method is not Method.POST
        ):
            raise StoredBodyNeedsPost()
        spec = _spec_of(body, previous, "body" in body.model_fields_set, deps.probe.guard)
        if spec.url != previous.url:
            await _preflight(deps.probe, spec.url)
        async with deps.pool.acquire() as conn, conn.transaction():
            current = await owned(conn, caller, watcher_id)
            reset = resets_baseline(current.spec, spec)
            record = await deps.repo.update_spec(conn, caller.subject, watcher_id, spec, reset_baseline=reset)
        if record is None:
            raise NotFound()
        return WatcherOut.of(record)

    @router.delete("/signal-watchers/{watcher_id}", status_code=204, responses=NOT_FOUND)
    async def delete_watcher(caller: Caller, watcher_id: uuid.UUID) -> Response:
        async with deps.pool.acquire() as conn:
            if not await deps.repo.delete(conn, caller.subject, watcher_id):
                raise NotFound()
        return Response(status_code=204)

    @router.post("/signal-watchers/{watcher_id}/status", response_model=WatcherOut, responses=NOT_FOUND)
    async def set_status(caller: Caller, watcher_id: uuid.UUID, body: StatusIn) -> WatcherOut:
        async with deps.pool.acquire() as conn:
            record = await deps.repo.set_status(conn, caller.subject, watcher_id, Status(body.status))
        if record is None:
            raise NotFound()
        return WatcherOut.of(record)

    @router.get(
        "/signal-watchers/{watcher_id}/checks",
        response_model=CheckPage,
        responses={**PAGING_ERRORS, **NOT_FOUND},
        openapi_extra=PAGING_RULES,
    )
    async def list_checks(
        caller: Caller,
        watcher_id: uuid.UUID,
        limit: Limit = PAGE_DEFAULT_ITEMS,
        offset: Offset = 0,
        cursor: Cursor = None,
    ) -> CheckPage:
        """The watcher's check rows, newest first, keyset-paged (`next_cursor`)."""
        before = _position(cursor, offset)
        async with deps.pool.acquire() as conn:
            await owned(conn, caller, watcher_id)
            rows = await deps.repo.list_checks(
                conn, watcher_id, limit=limit + 1, offset=offset, before=before
            )
        return CheckPage(
            items=[CheckOut.of(r) for r in rows[:limit]],
            limit=limit,
            offset=offset,
            next_cursor=_next_cursor(rows, limit, lambda r: r.checked_at),
        )

    @router.post(
        "/signal-watchers/{watcher_id}/check",
        response_model=WatcherOut,
        status_code=202,
        responses={
            **NOT_FOUND,
            409: {"description": "watcher_not_active: only an ACTIVE watcher is checked"},
            429: {"description": f"check_too_soon: last check under {CHECK_NOW_MIN_SPACING_SECONDS} s ago"},
        },
    )
    async def check_now(caller: Caller, watcher_id: uuid.UUID) -> WatcherOut:
        """Run a real check as soon as possible (recorded, may trigger, counts failures), like a due one.
        Overrides the interval and a failure backoff; at most one per watcher every
        CHECK_NOW_MIN_SPACING_SECONDS, so the API cannot be used to hammer a target."""
        async with deps.pool.acquire() as conn:
            record = await deps.repo.request_check(
                conn, caller.subject, watcher_id, min_spacing_seconds=CHECK_NOW_MIN_SPACING_SECONDS
            )
            if record is None:
                current = await owned(conn, caller, watcher_id)
                raise NotActive() if current.status is not Status.ACTIVE else CheckTooSoon()
        deps.check_requested()
        return WatcherOut.of(record)

    @router.post("/signal-watchers/{watcher_id}/test", response_model=TestResultOut, responses=NOT_FOUND)
    async def test_now(caller: Caller, watcher_id: uuid.UUID) -> TestResultOut:
        async with deps.pool.acquire() as conn:
            record = await owned(conn, caller, watcher_id)
        result = await probe_and_judge(deps.probe, record)
        judged = result.judged
        return TestResultOut(
            ok=judged is not None,
            error_code=result.error_code,
            http_status=result.http_status,
            duration_ms=result.duration_ms,
            value_hash=judged.value_hash if judged else None,
            value_excerpt=judged.excerpt if judged else None,
            would_change=bool(
                judged and record.last_value_hash and judged.value_hash != record.last_value_hash
            ),
            is_baseline=bool(judged and record.last_value_hash is None),
            sample=result.sample,
        )

    @router.get(
        "/admin/signal-watchers",
        response_model=AdminWatcherPage,
        responses={**PAGING_ERRORS, 403: {"description": f"forbidden: the token lacks `{ADMIN_PERMISSION}`"}},
        openapi_extra=PAGING_RULES,
    )
    async def admin_list(
        caller: Caller, limit: Limit = PAGE_DEFAULT_ITEMS, offset: Offset = 0, cursor: Cursor = None
    ) -> AdminWatcherPage:
        """Every user's watchers, oldest first, keyset-paged (`next_cursor`); needs `signal:read`."""
        caller.require(ADMIN_PERMISSION)
        after = _position(cursor, offset)
        async with deps.pool.acquire() as conn:
            records = await deps.repo.list_all(conn, limit=limit + 1, offset=offset, after=after)
        return AdminWatcherPage(
            items=[WatcherAdminOut.of(r) for r in records[:limit]],
            limit=limit,
            offset=offset,
            next_cursor=_next_cursor(records, limit, lambda r: r.created_at),
        )

    app.include_router(router)


def openapi_document(version: str) -> dict[str, Any]:
    """The API's OpenAPI document (published as schemas/openapi/signal-watcher.v1.json). Building it calls
    no route, so the dependencies are placeholders and nothing connects anywhere."""
    app = create_app("signal-watcher", version)
    placeholder: Any = None
    install_api(
        app,
        ApiDeps(
            pool=placeholder,
            repo=placeholder,
            probe=placeholder,
            verifier=TokenVerifier(os.urandom(32), issuer="openapi", audience="signal-watcher"),
            max_watchers_per_user=1,
        ),
    )
    return app.openapi()
