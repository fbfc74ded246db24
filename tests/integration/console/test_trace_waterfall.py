"""The console's trace reading against a real Jaeger (a private one, `yovision_platform.tools.jaeger`): a
trace of several services posted over OTLP/HTTP comes back through the console's Jaeger adapter, is laid
out and rendered by the console's own trace page template, one SVG row per span under its parent; the
device's trace list finds it by its `yovision.device_id`."""

from __future__ import annotations

import asyncio
import re
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.adapters.jaeger import JaegerQuery
from console.entrypoints.templating import page_templates
from console.service_layer.traces import TraceState, device_traces, trace_view
from tests.support.otlp_traces import SYNTHETIC_SPANS, post_synthetic_trace
from yovision_platform.tools.jaeger import PrivateJaeger, private_jaeger

ROW = re.compile(r'<a href="#span-[0-9a-f]{16}" class="span-row( error)?"[^>]*data-depth="(\d+)"')
PAGE_CONTEXT = {"csrf": "token", "user": None, "flash": None, "path": "/traces/x", "request": None}


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateJaeger]:
    with private_jaeger(tmp_path_factory.mktemp("jaeger")) as running:
        yield running


def depth_of(key: str) -> int:
    parents = {k: parent for k, parent, *_ in SYNTHETIC_SPANS}
    depth, parent = 0, parents[key]
    while parent is not None:
        depth, parent = depth + 1, parents[parent]
    return depth


async def test_a_posted_trace_renders_as_one_svg_row_per_span_under_its_parent(jaeger: PrivateJaeger) -> None:
    trace_id, device_id = secrets.token_hex(16), str(uuid.uuid4())
    await asyncio.to_thread(post_synthetic_trace, jaeger, trace_id, device_id)
    query = JaegerQuery(jaeger.query_url)
    try:
        view = await trace_view(query, trace_id)
        listed = await device_traces(query, device_id)
        other = await device_traces(query, str(uuid.uuid4()))
    finally:
        await query.aclose()

    assert view.state is TraceState.FOUND and view.waterfall is not None
    assert {service for service, _ in view.waterfall.services} == {s[2] for s in SYNTHETIC_SPANS}
    html = page_templates().get_template("trace.html").render(**PAGE_CONTEXT, view=view)
    rows = [(bool(error), int(depth)) for error, depth in ROW.findall(html)]
    # depth-first from the console's root, siblings by start: the order SYNTHETIC_SPANS lists them in
    assert rows == [(error, depth_of(key)) for key, _, _, _, _, _, error in SYNTHETIC_SPANS]
    assert f'data-rows="{len(SYNTHETIC_SPANS)}"' in html
    assert "s3cr3t" not in html and "url.full" not in html and device_id in html

    assert listed.state is TraceState.FOUND and [t.trace_id for t in listed.items] == [trace_id]
    assert listed.items[0].span_count == len(SYNTHETIC_SPANS) and listed.items[0].error
    assert other.state is TraceState.NOT_FOUND


async def test_an_unknown_trace_and_a_stopped_jaeger_are_states_not_errors(
    jaeger: PrivateJaeger, tmp_path: Path
) -> None:
    query = JaegerQuery(jaeger.query_url)
    try:
        assert (await trace_view(query, secrets.token_hex(16))).state is TraceState.NOT_FOUND
    finally:
        await query.aclose()
    with private_jaeger(tmp_path) as stopped_later:
        url = stopped_later.query_url
    gone = JaegerQuery(url)
    try:
        view = await trace_view(gone, secrets.token_hex(16))
    finally:
        await gone.aclose()
    assert (view.state, view.reason) == (TraceState.UNAVAILABLE, "jaeger_unavailable")
