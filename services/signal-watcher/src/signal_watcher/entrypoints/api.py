"""HTTP API: `/v1/signal-watchers` (the caller's own watchers) and `/v1/admin/signal-watchers` (read-only,
permission `signal:read`).

Identity is the `sub` of a verified access token of the OpenID provider (`AccessTokenCaller`, audience
`signal-watcher`; the service's entrypoint puts the verifier on the app with `use_access_tokens`). Every user
query filters by it: a watcher of another user is `404 not_found`, never 403. Errors are problem details
with a stable `code`.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response

from signal_watcher.bootstrap import SignalUseCases
from signal_watcher.domain.errors import CHECK_NOW_MIN_SPACING_SECONDS
from signal_watcher.domain.model import Header, Status, WatcherSpec
from signal_watcher.domain.records import Position
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
from signal_watcher.service_layer.watchers import Watchers
from yovision_platform.web import AccessTokenCaller, create_app, cursor_query, decode_cursor, encode_cursor

__all__ = ["ADMIN_PERMISSION", "PAGE_MAX_ITEMS", "include_api", "openapi_document", "router", "watchers_of"]

ADMIN_PERMISSION = "signal:read"
PAGE_MAX_ITEMS = 100
PAGE_DEFAULT_ITEMS = 50


def watchers_of(request: Request) -> Watchers:
    """The use case the routes call, from the app's use cases (`include_api`). Who calls is
    `AccessTokenCaller`'s: the app's verifier (`use_access_tokens` in the entrypoint,
    `use_access_token_verifier` in tests)."""
    use_cases: SignalUseCases = request.app.state.use_cases
    return use_cases.watchers


UseCase = Annotated[Watchers, Depends(watchers_of)]

Limit = Annotated[int, Query(ge=1, le=PAGE_MAX_ITEMS)]
OFFSET_MAX_ITEMS = 1_000_000
Offset = Annotated[
    int,
    Query(
        ge=0,
        le=OFFSET_MAX_ITEMS,
        description="Skip this many items: from the start of the list, or, with `cursor`, after the "
        "cursor's position (the page is the `limit` items after those). Alone it is deprecated (kept for "
        "clients written before the cursor): page with `cursor`.",
    ),
]
Cursor = Annotated[
    str | None,
    cursor_query(
        uuid.UUID,
        description="`next_cursor` of the previous page: the page starts after that position, and after "
        "`offset` more items when `offset` is given too.",
    ),
]
EditOf = Annotated[
    uuid.UUID | None,
    Query(
        description="Test the body as an update of this watcher of the caller would save it: header values "
        "sent masked (`******`) and, when `body` is left out, the body are the stored ones (as `PUT` does), "
        "and `would_change`/`is_baseline` compare with its baseline unless the edit resets it. Without it, "
        "the body is a new definition: no baseline yet, so `is_baseline` is true when the value is judged.",
    ),
]
Responses = dict[int | str, dict[str, Any]]
PAGING_ERRORS: Responses = {400: {"description": "invalid_cursor: `cursor` is not a cursor of this list."}}
NOT_FOUND: Responses = {404: {"description": "not_found: the caller has no watcher with this id."}}
SSRF_REFUSED: Responses = {
    403: {
        "description": "ssrf_*: the SSRF policy refuses the URL's host or address; probe_network_confined: "
        "the address lies outside the networks this deployment confines probes to."
    }
}


def _position(cursor: str | None) -> Position | None:
    if cursor is None:
        return None
    return decode_cursor(cursor, uuid.UUID)  # InvalidCursor: 400 invalid_cursor


def _cursor(position: Position | None) -> str | None:
    return None if position is None else encode_cursor(*position)


def _spec(body: WatcherIn) -> WatcherSpec:
    """The definition as sent (the use case validates it)."""
    return WatcherSpec(
        name=body.name,
        agent_id=body.agent_id,
        url=body.url,
        method=body.method,
        headers=tuple(Header(h.key, h.value) for h in body.headers),
        body=body.body,
        interval_minutes=body.interval_minutes,
        compare_mode=body.compare_mode,
        json_path=body.json_path,
        prompt_template=body.prompt_template,
    )


router = APIRouter(prefix="/v1")


@router.get("/signal-watchers", response_model=WatcherPage, responses=PAGING_ERRORS)
async def list_watchers(
    watchers: UseCase,
    caller: AccessTokenCaller,
    limit: Limit = PAGE_DEFAULT_ITEMS,
    offset: Offset = 0,
    cursor: Cursor = None,
) -> WatcherPage:
    """The caller's watchers, oldest first, keyset-paged (`next_cursor`)."""
    page = await watchers.list_own(caller.subject, limit=limit, offset=offset, after=_position(cursor))
    return WatcherPage(
        items=[WatcherOut.of(r) for r in page.items],
        limit=limit,
        offset=offset,
        next_cursor=_cursor(page.next_position),
    )


@router.post(
    "/signal-watchers",
    response_model=WatcherOut,
    status_code=201,
    responses={**SSRF_REFUSED, 409: {"description": "watcher_limit_reached"}},
)
async def create_watcher(watchers: UseCase, caller: AccessTokenCaller, body: WatcherIn) -> WatcherOut:
    return WatcherOut.of(await watchers.create(caller.subject, _spec(body)))


# Before every `/signal-watchers/{watcher_id}...` route (the path has no `/` after the collection, so no
# such route could match it anyway; tests/integration/signal_watcher/test_test_definition.py checks it).
@router.post(
    "/signal-watchers:test",
    response_model=TestResultOut,
    responses={
        **SSRF_REFUSED,
        404: {"description": "not_found: `edit_of` names no watcher of the caller."},
        409: {"description": "stored_body_requires_post: with `edit_of`, the kept body needs POST"},
    },
)
async def test_definition(
    watchers: UseCase,
    caller: AccessTokenCaller,
    body: WatcherIn,
    edit_of: EditOf = None,  # noqa: PT028 (a route, not a test)
) -> TestResultOut:
    """Test a definition before saving it: validated as create validates it (the SSRF policy and the
    name resolved now included), then probed and judged once exactly as `/{watcher_id}/test` does.
    Nothing is written, nothing is published, no run is triggered."""
    preview = await watchers.preview_definition(
        caller.subject, _spec(body), edit_of=edit_of, body_sent="body" in body.model_fields_set
    )
    return TestResultOut.of(preview)


@router.get("/signal-watchers/{watcher_id}", response_model=WatcherOut, responses=NOT_FOUND)
async def get_watcher(watchers: UseCase, caller: AccessTokenCaller, watcher_id: uuid.UUID) -> WatcherOut:
    return WatcherOut.of(await watchers.get(caller.subject, watcher_id))


@router.put(
    "/signal-watchers/{watcher_id}",
    response_model=WatcherOut,
    responses={
        **NOT_FOUND,
        **SSRF_REFUSED,
        409: {"description": "stored_body_requires_post: the kept body needs POST; send `body: null`"},
    },
)
async def update_watcher(
    watchers: UseCase, caller: AccessTokenCaller, watcher_id: uuid.UUID, body: WatcherIn
) -> WatcherOut:
    body_sent = "body" in body.model_fields_set
    return WatcherOut.of(await watchers.update(caller.subject, watcher_id, _spec(body), body_sent=body_sent))


@router.delete("/signal-watchers/{watcher_id}", status_code=204, responses=NOT_FOUND)
async def delete_watcher(watchers: UseCase, caller: AccessTokenCaller, watcher_id: uuid.UUID) -> Response:
    await watchers.delete(caller.subject, watcher_id)
    return Response(status_code=204)


@router.post("/signal-watchers/{watcher_id}/status", response_model=WatcherOut, responses=NOT_FOUND)
async def set_status(
    watchers: UseCase, caller: AccessTokenCaller, watcher_id: uuid.UUID, body: StatusIn
) -> WatcherOut:
    return WatcherOut.of(await watchers.set_status(caller.subject, watcher_id, Status(body.status)))


@router.get(
    "/signal-watchers/{watcher_id}/checks",
    response_model=CheckPage,
    responses={**PAGING_ERRORS, **NOT_FOUND},
)
async def list_checks(
    watchers: UseCase,
    caller: AccessTokenCaller,
    watcher_id: uuid.UUID,
    limit: Limit = PAGE_DEFAULT_ITEMS,
    offset: Offset = 0,
    cursor: Cursor = None,
) -> CheckPage:
    """The watcher's check rows, newest first, keyset-paged (`next_cursor`)."""
    page = await watchers.list_checks(
        caller.subject, watcher_id, limit=limit, offset=offset, before=_position(cursor)
    )
    return CheckPage(
        items=[CheckOut.of(r) for r in page.items],
        limit=limit,
        offset=offset,
        next_cursor=_cursor(page.next_position),
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
async def check_now(watchers: UseCase, caller: AccessTokenCaller, watcher_id: uuid.UUID) -> WatcherOut:
    """Run a real check as soon as possible (recorded, may trigger, counts failures), like a due one.
    Overrides the interval and a failure backoff; at most one per watcher every
    CHECK_NOW_MIN_SPACING_SECONDS, so the API cannot be used to hammer a target."""
    return WatcherOut.of(await watchers.request_check(caller.subject, watcher_id))


@router.post("/signal-watchers/{watcher_id}/test", response_model=TestResultOut, responses=NOT_FOUND)
async def test_now(watchers: UseCase, caller: AccessTokenCaller, watcher_id: uuid.UUID) -> TestResultOut:
    return TestResultOut.of(await watchers.preview(caller.subject, watcher_id))


@router.get(
    "/admin/signal-watchers",
    response_model=AdminWatcherPage,
    responses={**PAGING_ERRORS, 403: {"description": f"forbidden: the token lacks `{ADMIN_PERMISSION}`"}},
)
async def admin_list(
    watchers: UseCase,
    caller: AccessTokenCaller,
    limit: Limit = PAGE_DEFAULT_ITEMS,
    offset: Offset = 0,
    cursor: Cursor = None,
) -> AdminWatcherPage:
    """Every user's watchers, oldest first, keyset-paged (`next_cursor`); needs `signal:read`."""
    caller.require(ADMIN_PERMISSION)
    page = await watchers.list_all(limit=limit, offset=offset, after=_position(cursor))
    return AdminWatcherPage(
        items=[WatcherAdminOut.of(r) for r in page.items],
        limit=limit,
        offset=offset,
        next_cursor=_cursor(page.next_position),
    )


def include_api(app: FastAPI, use_cases: SignalUseCases) -> None:
    """Serve the routes on `app`, calling `use_cases`."""
    app.state.use_cases = use_cases
    app.include_router(router)


def openapi_document(version: str) -> dict[str, Any]:
    """The API's OpenAPI document (published as schemas/openapi/signal-watcher.v1.json), of the production
    router. Building it calls no route: no use case, no verifier, nothing connects anywhere."""
    app = create_app("signal-watcher", version)
    app.include_router(router)
    return app.openapi()
