"""Reading traces for the pages: a trace's waterfall, and the recent traces of a device or a material.

Neither raises: Jaeger being away or a trace not (yet) stored is a state the page explains (`TraceState`),
because the pages that list traces must render without them, and a trace still arriving (the services
export spans in batches) may be there at the next reload.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from console.domain.waterfall import TraceSummary, TracesUnavailable, Waterfall, layout, summary_of
from console.service_layer.ports import TraceStore

DEVICE_ATTRIBUTE = "yovision.device_id"
MATERIAL_ATTRIBUTE = "yovision.material_id"
DEVICE_SERVICE = "sense-reconciler"
MATERIAL_SERVICE = "media-worker"


class TraceState(enum.Enum):
    FOUND = "found"
    NOT_FOUND = "not_found"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class TraceView:
    trace_id: str
    state: TraceState
    waterfall: Waterfall | None = None
    reason: str | None = None


@dataclass(frozen=True)
class TraceList:
    state: TraceState
    items: tuple[TraceSummary, ...] = ()
    reason: str | None = None


async def trace_view(jaeger: TraceStore, trace_id: str) -> TraceView:
    try:
        trace = await jaeger.trace(trace_id)
    except TracesUnavailable as exc:
        return TraceView(trace_id, TraceState.UNAVAILABLE, reason=exc.reason)
    if trace is None or not trace.spans:
        return TraceView(trace_id, TraceState.NOT_FOUND)
    return TraceView(trace_id, TraceState.FOUND, layout(trace.spans))


async def traces_of(jaeger: TraceStore, service: str, attribute: str, value: str) -> TraceList:
    """The recent traces where `service` recorded `attribute=value`, newest first."""
    try:
        found = await jaeger.search(service, {attribute: value})
    except TracesUnavailable as exc:
        return TraceList(TraceState.UNAVAILABLE, reason=exc.reason)
    summaries = sorted((summary_of(t.trace_id, t.spans) for t in found), key=lambda s: -s.start_us)
    return TraceList(TraceState.FOUND if summaries else TraceState.NOT_FOUND, tuple(summaries))


async def device_traces(jaeger: TraceStore, device_id: str) -> TraceList:
    return await traces_of(jaeger, DEVICE_SERVICE, DEVICE_ATTRIBUTE, device_id)


async def material_traces(jaeger: TraceStore, material_id: str) -> TraceList:
    return await traces_of(jaeger, MATERIAL_SERVICE, MATERIAL_ATTRIBUTE, material_id)


@dataclass(frozen=True)
class Traces:
    """The trace pages' use case, over the trace store: a trace's waterfall, a device's or a material's
    recent traces."""

    store: TraceStore

    async def view(self, trace_id: str) -> TraceView:
        return await trace_view(self.store, trace_id)

    async def of_device(self, device_id: str) -> TraceList:
        return await device_traces(self.store, device_id)

    async def of_material(self, material_id: str) -> TraceList:
        return await material_traces(self.store, material_id)
