"""Trace pages (with `CONSOLE_JAEGER_URL`): a trace's span waterfall, and the trace lists of the device and
material pages. Traces are for users who may read the audit trail (`bell:audit-read`, docs/decisions.md):
the console asks Jaeger on their behalf, with no identity Jaeger could check."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from console.domain.identity import AUDIT_READ, User
from console.domain.trace_fields import trace_id_of
from console.entrypoints.dependencies import Console, ConsoleDep, CurrentUser, require
from console.service_layer.traces import TraceList

router = APIRouter(include_in_schema=False)


def traces_shown(console: Console, user: User) -> bool:
    """Whether pages show trace links to `user`: Jaeger is set and the user may read traces."""
    return console.use_cases.traces is not None and user.may(AUDIT_READ)


async def device_trace_list(console: Console, user: User, device_id: str) -> TraceList | None:
    """The device's recent traces for its page; None when the page shows none."""
    traces = console.use_cases.traces
    if traces is None or not user.may(AUDIT_READ):
        return None
    return await traces.of_device(device_id)


async def material_trace_list(console: Console, user: User, material_id: str) -> TraceList | None:
    """The material's recent traces for its page; None when the page shows none."""
    traces = console.use_cases.traces
    if traces is None or not user.may(AUDIT_READ):
        return None
    return await traces.of_material(material_id)


@router.get("/traces/{trace_id}", response_class=HTMLResponse)
async def trace_page(request: Request, console: ConsoleDep, user: CurrentUser, trace_id: str) -> Response:
    require(user, AUDIT_READ)
    traces = console.use_cases.traces
    if traces is None:
        return console.error(request, 404, "tracing_not_configured")
    checked = trace_id_of(trace_id)
    if checked is None:
        return console.error(request, 400, "invalid_trace_id")
    return console.render(request, "trace.html", view=await traces.view(checked))
