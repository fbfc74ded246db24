"""One trace per change, across processes: Sense's API, its outbox and relay, its reconcile and MediaMTX
call, the audit push and Bell's store, read back from the environment's Jaeger and drawn by the console in
Chromium (with `YOVISION_DOCS_IMAGES=1`, the waterfall's screenshot becomes `docs/images/console-trace.png`);
and what a bad ``traceparent`` gets (a new trace, never an error)."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import expect

from tests.e2e.console_browser import SCREENSHOTS, Visitor, waterfall_screenshot
from tests.e2e.traces import TRACE_TIMEOUT_SECONDS, kind_of, new_traceparent, trace_with
from tests.support.e2e_fixtures import Witness, camera_source, device_body, eventually
from tests.support.e2e_flows import user_client
from yovision_platform.tools.environment import LocalEnvironment

DOCS_IMAGE = Path(__file__).resolve().parents[2] / "docs" / "images" / "console-trace.png"


def new_device(witness: Witness, camera_host: str) -> dict[str, Any]:
    site, path = f"site-{uuid.uuid4().hex[:6]}", f"traced-{uuid.uuid4().hex[:8]}"
    return device_body("tenant-traced", site, path, camera_source(witness, camera_host))


async def audit_row(env: LocalEnvironment, witness: Witness, device_id: str) -> dict[str, Any] | None:
    async with await user_client(env, witness, "bell-receiver", "e2e-auditor", "bell:audit-read") as bell:
        response = await bell.get(
            "/v1/audit-events", params={"source_system": "sense", "device_id": device_id}
        )
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items[0] if items else None


async def test_a_device_create_is_one_trace_from_senses_api_to_bells_store(
    env: LocalEnvironment, sense: httpx.AsyncClient, witness: Witness, operator: Visitor
) -> None:
    trace_id, traceparent = new_traceparent()
    path = f"traced-{uuid.uuid4().hex[:8]}"
    body = device_body(
        "tenant-traced", f"site-{uuid.uuid4().hex[:6]}", path, camera_source(witness, "10.7.0.1")
    )
    created = await sense.post("/v1/devices", json=body, headers={"traceparent": traceparent})
    assert created.status_code == 201, created.text
    device_id = created.json()["id"]
    wanted = {
        "sense-reconciler": {"POST /v1/devices", "outbox enqueue", "reconcile", "audit push"},
        "bell-receiver": {"audit store"},
    }
    found = await eventually(
        lambda: trace_with(env, trace_id, wanted), within=TRACE_TIMEOUT_SECONDS, what="the device's trace"
    )
    sense_spans = found["sense-reconciler"]
    operations = {span["operationName"] for span in sense_spans}
    assert any(op.endswith(" publish") for op in operations), "the relay's publish"
    [api] = [span for span in sense_spans if span["operationName"] == "POST /v1/devices"]
    assert kind_of(api) == "server"
    [reconcile] = [span for span in sense_spans if span["operationName"] == "reconcile"]
    assert {"key": "yovision.device_id", "type": "string", "value": device_id} in reconcile["tags"]
    calls = [s for s in sense_spans if kind_of(s) == "client" and s["operationName"] in ("GET", "POST")]
    assert any(
        ref["spanID"] == reconcile["spanID"] for call in calls for ref in call.get("references", [])
    ), "the MediaMTX call is a child of the reconcile"
    row = await eventually(lambda: audit_row(env, witness, device_id), what="the audit row in Bell")
    assert row["trace_id"] == trace_id

    # The console: the device's page lists the trace, and the trace's page draws every span of it.
    await operator.open(f"/devices/{device_id}")
    await expect(operator.page.locator(f'a[href="/traces/{trace_id}"]')).to_have_count(1)
    spans = sum(len(of_service) for of_service in found.values())
    shot = await waterfall_screenshot(operator, trace_id, SCREENSHOTS / "console-device-trace.png")
    rows = operator.page.locator("svg a.span-row")
    assert await rows.count() >= spans
    for operation in ("POST /v1/devices", "reconcile", "audit push", "audit store"):
        await expect(operator.page.locator("svg text.span-label", has_text=operation).first).to_be_visible()
    if os.environ.get("YOVISION_DOCS_IMAGES") == "1":
        DOCS_IMAGE.write_bytes(shot.read_bytes())


@pytest.mark.parametrize(
    "traceparent",
    [
        "00-zzzz-b7ad6b7169203331-01",  # malformed
        "01-" + "a" * 32 + "-" + "b" * 16 + "-01-" + "c" * 200,  # over-long
        "00-" + "a" * 32 + "-" + "b" * 16 + "-0x",  # an invalid flag
    ],
    ids=["malformed", "over-long", "invalid-flag"],
)
async def test_a_bad_traceparent_starts_a_new_trace_and_is_never_an_error(
    env: LocalEnvironment, sense: httpx.AsyncClient, witness: Witness, traceparent: str
) -> None:
    path = f"badtrace-{uuid.uuid4().hex[:8]}"
    body = device_body(
        "tenant-traced", f"site-{uuid.uuid4().hex[:6]}", path, camera_source(witness, "10.7.0.2")
    )
    created = await sense.post("/v1/devices", json=body, headers={"traceparent": traceparent})
    assert created.status_code == 201, created.text
    row = await eventually(lambda: audit_row(env, witness, created.json()["id"]), what="the audit row")
    # A new trace (sampled or not, by the ratio, its id travels on): the id Sense made, not the caller's.
    trace_id = row["trace_id"]
    assert trace_id is not None and re.fullmatch("[0-9a-f]{32}", trace_id)
    assert trace_id not in traceparent, "a new trace, not the caller's text"
