"""Operator pages: overview, devices (Sense), orphans (orphan-scanner, read-only), audit trail (Bell)."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from console.domain.identity import AUDIT_READ, ORPHAN_READ, SENSE_OPERATE, User
from console.entrypoints.dependencies import Console, ConsoleDep, CurrentUser, form_of, require
from console.entrypoints.pages_traces import device_trace_list, traces_shown
from console.service_layer.overview import SERVICES
from console.service_layer.ports import ApiError
from console.service_layer.reads import concurrently

router = APIRouter(include_in_schema=False)
DEVICE_PAGE_ITEMS = 50
AUDIT_PAGE_ITEMS = 50
TEXT_MAX_CHARS = 128


def _text(value: object, limit: int = TEXT_MAX_CHARS) -> str | None:
    """A filter or form value: stripped, at most `limit` characters, or None when empty."""
    text = str(value or "").strip()
    return text[:limit] or None


def _uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


@router.get("/", response_class=HTMLResponse)
async def overview_page(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    services, alerts = await console.use_cases.overview.everything()
    return console.render(request, "overview.html", services=services, alerts=alerts)


@router.get("/services/{name}", response_class=HTMLResponse)
async def service_page(request: Request, console: ConsoleDep, user: CurrentUser, name: str) -> Response:
    if name not in SERVICES:
        return console.error(request, 404, "not_found")
    return console.render(request, "service.html", health=await console.use_cases.overview.service(name))


# --- devices ---------------------------------------------------------------------------------------------


async def _device_page(console: Console, user: User, params: dict[str, Any]) -> dict[str, Any]:
    sense = console.use_cases.sense
    page = await sense.devices(
        user,
        tenant_id=params.get("tenant_id"),
        site_id=params.get("site_id"),
        after=params.get("after"),
        limit=DEVICE_PAGE_ITEMS,
    )
    devices = page["items"]
    statuses: dict[str, dict[str, Any]] = {}
    if devices:
        found = await sense.reconcile_statuses(user, [d["id"] for d in devices])
        statuses = {s["device_id"]: s for s in found["items"]}
    rows = [{**d, "reconcile": statuses.get(d["id"])} for d in devices]
    converging = any(r["reconcile"] and r["reconcile"]["status"] == "pending" for r in rows)
    return {"rows": rows, "next_after": page["next_after"], "converging": converging}


def _device_filters(request: Request) -> dict[str, Any]:
    q = request.query_params
    after = _uuid(q.get("after"))
    return {
        "tenant_id": _text(q.get("tenant_id"), 64),
        "site_id": _text(q.get("site_id"), 64),
        "after": str(after) if after else None,
    }


@router.get("/devices", response_class=HTMLResponse)
async def devices_page(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    require(user, SENSE_OPERATE)
    filters = _device_filters(request)
    return console.render(
        request, "devices.html", filters=filters, **await _device_page(console, user, filters)
    )


@router.get("/devices/rows", response_class=HTMLResponse)
async def device_rows(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    """The table body alone: htmx polls it while a device converges."""
    require(user, SENSE_OPERATE)
    filters = _device_filters(request)
    return console.render(
        request, "partials/device_rows.html", filters=filters, **await _device_page(console, user, filters)
    )


@router.post("/devices/batch", response_class=HTMLResponse)
async def devices_batch(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    require(user, SENSE_OPERATE)
    form = await form_of(request)
    state = "enabled" if form.get("desired_state") == "enabled" else "disabled"
    ids = [str(d) for raw in form.getlist("device_id") if (d := _uuid(raw)) is not None]
    back = str(form.get("back") or "/devices")
    back = back if back.startswith("/devices") else "/devices"
    if not ids:
        return console.redirect(request, back, flash="Select at least one device.")
    try:
        await console.use_cases.sense.set_desired_states(user, ids, state)
    except ApiError as exc:
        return console.redirect(request, back, flash=f"Nothing changed: {exc.code}")
    return console.redirect(request, back, flash=f"{len(ids)} device(s) set to {state}.")


@router.get("/devices/new", response_class=HTMLResponse)
async def new_device_page(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    require(user, SENSE_OPERATE)
    return console.render(request, "device_form.html", values={}, errors={})


@router.post("/devices", response_class=HTMLResponse)
async def create_device(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    require(user, SENSE_OPERATE)
    form = await form_of(request)
    values = {k: str(form.get(k, "")).strip() for k in ("tenant_id", "site_id", "name", "path_name")}
    body = {**values, "source_uri": str(form.get("source_uri", "")).strip()}
    body["desired_state"] = "enabled" if form.get("desired_state") == "enabled" else "disabled"
    try:
        created = await console.use_cases.sense.create_device(user, body)
    except ApiError as exc:
        # The source URI is never put back into the form: it is write-only.
        errors = {f: exc.code for f in exc.fields} or {"form": exc.code}
        if exc.code == "path_name_taken":
            errors = {"path_name": exc.code}
        return console.render(request, "device_form.html", 422, values=values, errors=errors)
    return console.redirect(request, f"/devices/{created['id']}", flash="Device created.")


@router.get("/devices/{device_id}", response_class=HTMLResponse)
async def device_page(
    request: Request, console: ConsoleDep, user: CurrentUser, device_id: uuid.UUID
) -> Response:
    require(user, SENSE_OPERATE)
    device, reconcile, traces = await concurrently(
        console.use_cases.sense.device(user, device_id),
        console.use_cases.sense.reconcile_status(user, device_id),
        device_trace_list(console, user, str(device_id)),
    )
    return console.render(request, "device.html", device=device, reconcile=reconcile, traces=traces)


@router.get("/devices/{device_id}/status", response_class=HTMLResponse)
async def device_status(
    request: Request, console: ConsoleDep, user: CurrentUser, device_id: uuid.UUID
) -> Response:
    require(user, SENSE_OPERATE)
    status = await console.use_cases.sense.reconcile_status(user, device_id)
    return console.render(request, "partials/device_status.html", reconcile=status, device_id=device_id)


@router.post("/devices/{device_id}", response_class=HTMLResponse)
async def change_device(
    request: Request, console: ConsoleDep, user: CurrentUser, device_id: uuid.UUID
) -> Response:
    require(user, SENSE_OPERATE)
    form = await form_of(request)
    body: dict[str, str] = {}
    if name := str(form.get("name", "")).strip():
        body["name"] = name
    if source := str(form.get("source_uri", "")).strip():  # blank: keep the stored one
        body["source_uri"] = source
    if not body:
        return console.redirect(request, f"/devices/{device_id}", flash="Nothing to change.")
    try:
        await console.use_cases.sense.change_device(user, device_id, body)
    except ApiError as exc:
        return console.redirect(request, f"/devices/{device_id}", flash=f"Not changed: {exc.code}")
    return console.redirect(request, f"/devices/{device_id}", flash="Device changed.")


@router.post("/devices/{device_id}/desired-state", response_class=HTMLResponse)
async def set_state(
    request: Request, console: ConsoleDep, user: CurrentUser, device_id: uuid.UUID
) -> Response:
    require(user, SENSE_OPERATE)
    form = await form_of(request)
    state = "enabled" if form.get("desired_state") == "enabled" else "disabled"
    try:
        await console.use_cases.sense.set_desired_state(user, device_id, state)
    except ApiError as exc:
        return console.redirect(request, f"/devices/{device_id}", flash=f"Not changed: {exc.code}")
    return console.redirect(request, f"/devices/{device_id}", flash=f"Device set to {state}.")


@router.get("/sites", response_class=HTMLResponse)
async def site_page(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    require(user, SENSE_OPERATE)
    tenant, site = (
        _text(request.query_params.get("tenant_id"), 64),
        _text(request.query_params.get("site_id"), 64),
    )
    limit = None
    if tenant and site:
        limit = await console.use_cases.sense.site(user, tenant, site)
    return console.render(request, "site.html", tenant_id=tenant, site_id=site, limit=limit)


@router.post("/sites", response_class=HTMLResponse)
async def set_site_limit(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    require(user, SENSE_OPERATE)
    form = await form_of(request)
    tenant, site = _text(form.get("tenant_id"), 64), _text(form.get("site_id"), 64)
    raw = str(form.get("max_video_channels", "")).strip()
    if not tenant or not site or not raw.isdigit():
        return console.redirect(request, "/sites", flash="Give a tenant, a site and a number 1..128.")
    back = f"/sites?tenant_id={tenant}&site_id={site}"
    try:
        await console.use_cases.sense.set_site_limit(user, tenant, site, int(raw))
    except ApiError as exc:
        return console.redirect(request, back, flash=f"Not changed: {exc.code}")
    return console.redirect(request, back, flash="Site limit saved.")


# --- orphans and audit -----------------------------------------------------------------------------------


@router.get("/orphans", response_class=HTMLResponse)
async def orphans_page(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    require(user, ORPHAN_READ)
    report = await console.use_cases.orphans.latest_report(user)
    return console.render(request, "orphans.html", report=report)


@router.get("/audit", response_class=HTMLResponse)
async def audit_page(request: Request, console: ConsoleDep, user: CurrentUser) -> Response:
    require(user, AUDIT_READ)
    q = request.query_params
    filters = {
        k: _text(q.get(k))
        for k in ("source_system", "event_type", "device_id", "actor", "occurred_from", "occurred_before")
    }
    for moment in ("occurred_from", "occurred_before"):  # a datetime-local field: minutes, taken as UTC
        value = filters[moment]
        if value and len(value) == 16:
            filters[moment] = value + ":00+00:00"
    try:
        page = await console.use_cases.bell.audit_events(
            user, filters, cursor=_text(q.get("cursor"), 64), limit=AUDIT_PAGE_ITEMS
        )
    except ApiError as exc:
        if exc.status not in (400, 422):
            raise
        page, filters["error"] = {"items": [], "next_cursor": None}, exc.code
    return console.render(
        request, "audit.html", page=page, filters=filters, trace_links=traces_shown(console, user)
    )
