"""User pages: inbox (Bell), watchers (signal-watcher), media (media-worker) with its upload proxy."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from starlette.background import BackgroundTask

from console.domain.identity import MEDIA_DRAIN, SIGNAL_ADMIN_READ, User
from console.domain.watcher_form import (
    FIELDS,
    HEADER_ROWS,
    FormPreview,
    body_of,
    field_of,
    headers_again,
    typed_secrets,
)
from console.entrypoints.dependencies import Console, ConsoleDep, CurrentUser, form_of, require
from console.entrypoints.pages_traces import material_trace_list
from console.service_layer.charts import HEIGHT, WIDTH, check_bars
from console.service_layer.ports import ApiError
from console.service_layer.reads import concurrently, optional

router = APIRouter(include_in_schema=False)
CHECK_PAGE_ITEMS = 25
WATCHER_PAGE_ITEMS = 50
OUTPUT_KINDS = ("cover", "preview_720p", "clip_10s")
PASSED_HEADERS = ("content-type", "content-length", "content-range", "accept-ranges", "last-modified", "etag")


def _cursor(request: Request) -> str | None:
    """The page's `cursor` as given (the owning API validates it: `400 invalid_cursor`), or None."""
    return request.query_params.get("cursor") or None


# --- inbox -----------------------------------------------------------------------------------------------


@router.get("/inbox", response_class=HTMLResponse)
async def inbox_page(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    page = await console.use_cases.bell.notifications(user, cursor=_cursor(request))
    return console.render(request, "inbox.html", page=page)


@router.post("/inbox/{notification_id}", response_class=HTMLResponse)
async def mark(request: Request, console: ConsoleDep, user: CurrentUser, notification_id: int) -> Response:
    form = await form_of(request)
    await console.use_cases.bell.mark_read(user, notification_id, read=form.get("read") == "true")
    return console.redirect(request, "/inbox")


# --- watchers --------------------------------------------------------------------------------------------


@router.get("/watchers", response_class=HTMLResponse)
async def watchers_page(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    cursor = _cursor(request)
    page = await console.use_cases.watchers.watchers(user, limit=WATCHER_PAGE_ITEMS, cursor=cursor)
    return console.render(request, "watchers.html", page=page, admin=False, paged=cursor is not None)


@router.get("/watchers/all", response_class=HTMLResponse)
async def all_watchers_page(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    require(user, SIGNAL_ADMIN_READ)
    cursor = _cursor(request)
    page = await console.use_cases.watchers.all_watchers(user, limit=WATCHER_PAGE_ITEMS, cursor=cursor)
    return console.render(request, "watchers.html", page=page, admin=True, paged=cursor is not None)


def _header_pairs(form: Any) -> list[tuple[str, str]]:
    keys, values = form.getlist("header_key"), form.getlist("header_value")
    return [(str(k).strip(), str(v)) for k, v in zip(keys, values, strict=False)]


def _form_page(
    request: Request,
    console: Console,
    http_status: int = 200,
    *,
    values: dict[str, Any],
    watcher: dict[str, Any] | None,
    headers: list[dict[str, str]],
    errors: dict[str, str] | None = None,
    preview: FormPreview | None = None,
) -> Response:
    """The create (`watcher` None) or edit form."""
    return console.render(
        request, "watcher_form.html", http_status, values=values, errors=errors or {}, watcher=watcher,
        headers=headers, rows=HEADER_ROWS, preview=preview,
    )  # fmt: skip


def _posted_values(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body.get(k) for k in FIELDS}


@router.get("/watchers/new", response_class=HTMLResponse)
async def new_watcher_page(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    values = {"method": "GET", "compare_mode": "HASH", "interval_minutes": 15}
    return _form_page(request, console, values=values, watcher=None, headers=[])


# What signal-watcher answers a definition it refuses, shown on the form: 422 (a rule), 409 (the watcher
# limit, a kept body that needs POST), 403 (the SSRF policy `ssrf_*`, the confinement
# `probe_network_confined`).
WATCHER_FORM_REFUSALS = (403, 409, 422)


@router.post("/watchers", response_class=HTMLResponse)
async def create_watcher(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    form = await form_of(request)
    body = body_of(form, _header_pairs(form))
    try:
        created = await console.use_cases.watchers.create_watcher(user, body)
    except ApiError as exc:
        if exc.status not in WATCHER_FORM_REFUSALS:
            raise
        # Header values and the body are secrets: never rendered back, the user types them again.
        return _form_page(
            request, console, 422, values=_posted_values(body), errors=field_of(exc.code, exc.fields),
            watcher=None, headers=[{"key": h["key"], "value": ""} for h in body["headers"]],
        )  # fmt: skip
    return console.redirect(request, f"/watchers/{created['id']}", flash="Watcher created.")


# The form's "Test": the definition as the form holds it now, probed and judged once by signal-watcher
# (`POST /v1/signal-watchers:test`, with `edit_of` on the edit form so masked header values and a blank body
# mean the stored ones, as saving would), nothing saved. Without JavaScript it is a normal form post that
# renders the form again with the result; with htmx only the result (`partials/watcher_form_preview.html`).
# Registered before `/watchers/{watcher_id}/test`, which would read `new` as an id.


@router.post("/watchers/new/test", response_class=HTMLResponse)
async def test_new_watcher(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    form = await form_of(request)
    return await _test_definition(request, console, user, body_of(form, _header_pairs(form)), None)


@router.post("/watchers/{watcher_id}/edit/test", response_class=HTMLResponse)
async def test_watcher_edit(
    request: Request, console: ConsoleDep, user: CurrentUser, watcher_id: uuid.UUID
) -> Response:
    form = await form_of(request)
    return await _test_definition(request, console, user, body_of(form, _header_pairs(form)), watcher_id)


async def _test_definition(
    request: Request, console: Console, user: User, body: dict[str, Any], edit_of: uuid.UUID | None
) -> Response:
    errors: dict[str, str] = {}
    try:
        result = await console.use_cases.watchers.test_definition(user, body, edit_of)
        preview = FormPreview(result=result)
    except ApiError as exc:
        if exc.status not in WATCHER_FORM_REFUSALS:
            raise
        preview, errors = FormPreview(refused=exc.code), field_of(exc.code, exc.fields)
    if request.headers.get("hx-request") == "true":  # the form stays as typed: only the result changes
        return console.render(request, "partials/watcher_form_preview.html", preview=preview)
    watcher = None
    if edit_of is not None:
        watcher = await console.use_cases.watchers.watcher(user, edit_of)
    return _form_page(
        request, console, 422 if preview.refused else 200, values=_posted_values(body), errors=errors,
        watcher=watcher, headers=headers_again(body),
        preview=FormPreview(preview.result, preview.refused, retype=typed_secrets(body)),
    )  # fmt: skip


async def _watcher_context(
    console: Console, user: User, watcher_id: uuid.UUID, cursor: str | None
) -> dict[str, Any]:
    watchers = console.use_cases.watchers
    watcher, checks = await concurrently(
        watchers.watcher(user, watcher_id),
        watchers.checks(user, watcher_id, limit=CHECK_PAGE_ITEMS, cursor=cursor),
    )
    items = checks["items"]
    changed_at = next((i for i, c in enumerate(items) if c["changed"]), None)
    last_change = items[changed_at] if changed_at is not None else None
    before = items[changed_at + 1] if changed_at is not None and changed_at + 1 < len(items) else None
    return {
        "watcher": watcher,
        "checks": items,
        "next_cursor": checks["next_cursor"],
        "paged": cursor is not None,
        "bars": check_bars(items),
        "chart_width": WIDTH,
        "chart_height": HEIGHT,
        "last_change": last_change,
        "before_change": before,
    }


@router.get("/watchers/{watcher_id}", response_class=HTMLResponse)
async def watcher_page(
    request: Request, console: ConsoleDep, user: CurrentUser, watcher_id: uuid.UUID
) -> Response:
    context = await _watcher_context(console, user, watcher_id, _cursor(request))
    return console.render(request, "watcher.html", preview=None, **context)


@router.get("/watchers/{watcher_id}/edit", response_class=HTMLResponse)
async def edit_watcher_page(
    request: Request, console: ConsoleDep, user: CurrentUser, watcher_id: uuid.UUID
) -> Response:
    watcher = await console.use_cases.watchers.watcher(user, watcher_id)
    values = {k: watcher.get(k) for k in FIELDS}
    return _form_page(request, console, values=values, watcher=watcher, headers=watcher["headers"])


@router.post("/watchers/{watcher_id}", response_class=HTMLResponse)
async def update_watcher(
    request: Request, console: ConsoleDep, user: CurrentUser, watcher_id: uuid.UUID
) -> Response:
    form = await form_of(request)
    body = body_of(form, _header_pairs(form))
    try:
        await console.use_cases.watchers.update_watcher(user, watcher_id, body)
    except ApiError as exc:
        if exc.status not in WATCHER_FORM_REFUSALS:
            raise
        watcher = await console.use_cases.watchers.watcher(user, watcher_id)
        return _form_page(
            request, console, 422, values=_posted_values(body), errors=field_of(exc.code, exc.fields),
            watcher=watcher, headers=watcher["headers"],
        )  # fmt: skip
    return console.redirect(request, f"/watchers/{watcher_id}", flash="Watcher saved.")


@router.post("/watchers/{watcher_id}/test", response_class=HTMLResponse)
async def test_watcher(
    request: Request, console: ConsoleDep, user: CurrentUser, watcher_id: uuid.UUID
) -> Response:
    preview = await console.use_cases.watchers.test_watcher(user, watcher_id)
    if request.headers.get("hx-request") == "true":
        return console.render(request, "partials/test_preview.html", preview=preview)
    context = await _watcher_context(console, user, watcher_id, None)
    return console.render(request, "watcher.html", preview=preview, **context)


@router.post("/watchers/{watcher_id}/check", response_class=HTMLResponse)
async def check_watcher(
    request: Request, console: ConsoleDep, user: CurrentUser, watcher_id: uuid.UUID
) -> Response:
    try:
        await console.use_cases.watchers.check_now(user, watcher_id)
    except ApiError as exc:
        if exc.status not in (409, 429):
            raise
        return console.redirect(request, f"/watchers/{watcher_id}", flash=f"Not checked: {exc.code}")
    return console.redirect(request, f"/watchers/{watcher_id}", flash="Check requested: it shows in the log.")


@router.post("/watchers/{watcher_id}/status", response_class=HTMLResponse)
async def watcher_status(
    request: Request, console: ConsoleDep, user: CurrentUser, watcher_id: uuid.UUID
) -> Response:
    form = await form_of(request)
    status = "PAUSED" if form.get("status") == "PAUSED" else "ACTIVE"
    await console.use_cases.watchers.set_status(user, watcher_id, status)
    return console.redirect(request, f"/watchers/{watcher_id}", flash=f"Watcher {status.lower()}.")


# --- media -----------------------------------------------------------------------------------------------


def _media_context(page: dict[str, Any], cursor: str | None) -> dict[str, Any]:
    busy = any(m["status"] in ("pending", "processing") for m in page["items"])
    return {"page": page, "busy": busy, "cursor": cursor}


@router.get("/media", response_class=HTMLResponse)
async def media_page(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    cursor = _cursor(request)
    media = console.use_cases.media
    materials = media.materials(user, cursor=cursor)
    drain: dict[str, Any] | None = None
    if user.may(MEDIA_DRAIN):
        page, instances, answering = await concurrently(
            materials, media.instances(user), optional(media.drain(user))
        )
        drain = {"instances": instances["items"], "answering": answering}
    else:
        page = await materials
    return console.render(request, "media.html", drain=drain, **_media_context(page, cursor))


@router.get("/media/rows", response_class=HTMLResponse)
async def media_rows(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    """The table body alone: htmx polls it while a material is pending or processing."""
    cursor = _cursor(request)
    page = await console.use_cases.media.materials(user, cursor=cursor)
    return console.render(request, "partials/material_rows.html", **_media_context(page, cursor))


@router.get("/media/{material_id}", response_class=HTMLResponse)
async def material_page(
    request: Request, console: ConsoleDep, user: CurrentUser, material_id: uuid.UUID
) -> Response:
    material, traces = await concurrently(
        console.use_cases.media.material(user, material_id),
        material_trace_list(console, user, str(material_id)),
    )
    return console.render(request, "material.html", material=material, traces=traces)


@router.post("/media/{material_id}/retry", response_class=HTMLResponse)
async def retry_material(
    request: Request, console: ConsoleDep, user: CurrentUser, material_id: uuid.UUID
) -> Response:
    try:
        await console.use_cases.media.retry(user, material_id)
    except ApiError as exc:
        return console.redirect(request, f"/media/{material_id}", flash=f"Not retried: {exc.code}")
    return console.redirect(request, f"/media/{material_id}", flash="Retry queued.")


@router.get("/media/{material_id}/outputs/{kind}")
async def material_output(
    request: Request, console: ConsoleDep, user: CurrentUser, material_id: uuid.UUID, kind: str
) -> Response:
    """Streams an output through the console (Range passed through, so the browser can seek a video)."""
    if kind not in OUTPUT_KINDS:
        return Response(status_code=404)
    wanted = {k: v for k, v in request.headers.items() if k in ("range", "if-range")}
    output = await console.use_cases.media.output(user, material_id, kind, wanted)
    headers = {k: v for k, v in output.headers.items() if k in PASSED_HEADERS}
    headers["Cache-Control"] = "private, max-age=300"
    return StreamingResponse(
        output.body, status_code=output.status, headers=headers, background=BackgroundTask(output.close)
    )


# The upload proxy: the browser's chunked upload goes through the console (same origin, the user's token
# added here); each answer is media-worker's JSON (or its problem code) as is.


async def _proxied(answer: Awaitable[Any]) -> Response:
    try:
        return JSONResponse(await answer)
    except ApiError as exc:
        return JSONResponse({"code": exc.code}, status_code=exc.status)


@router.post("/media/uploads")
async def init_upload(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    body = await request.json()
    return await _proxied(console.use_cases.media.start_upload(user, body))


@router.put("/media/uploads/{session_id}/chunks/{index}")
async def put_chunk(
    request: Request, console: ConsoleDep, user: CurrentUser, session_id: uuid.UUID, index: int
) -> Response:
    length = request.headers.get("content-length", "")
    media = console.use_cases.media
    return await _proxied(
        media.put_chunk(user, session_id, index, request.stream(), length if length.isdigit() else None)
    )


@router.post("/media/uploads/{session_id}/complete")
async def complete_upload(
    request: Request, console: ConsoleDep, user: CurrentUser, session_id: uuid.UUID
) -> Response:
    return await _proxied(console.use_cases.media.complete_upload(user, session_id))
