"""The trace waterfall in Chromium: a trace of five services (`tests/support/otlp_traces.py`), posted to the
session's private Jaeger, drawn by the console with no browser error, CSP refusal or axe violation; a span
picked in the picture shows its attributes (the allowed ones), and an id that is no trace id gets the error
page. The waterfall's screenshot is kept under `.local/console-screenshots/` (the docs' picture is a real
device's trace: `test_tracing.py`)."""

from __future__ import annotations

import asyncio
import secrets
import uuid

from playwright.async_api import expect

from tests.e2e.console_browser import SCREENSHOTS, Visitor, waterfall_screenshot
from tests.support.otlp_traces import SYNTHETIC_SPANS, post_synthetic_trace
from yovision_platform.tools.environment import LocalEnvironment
from yovision_platform.tools.jaeger import PrivateJaeger

FAILED_SPAN = next(i for i, s in enumerate(SYNTHETIC_SPANS) if s[6])


async def test_the_waterfall_of_a_trace_of_five_services_draws_without_a_browser_error(
    env: LocalEnvironment, jaeger: PrivateJaeger, operator: Visitor
) -> None:
    trace_id, device_id = secrets.token_hex(16), str(uuid.uuid4())
    await asyncio.to_thread(post_synthetic_trace, jaeger, trace_id, device_id)

    shot = await waterfall_screenshot(operator, trace_id, SCREENSHOTS / "console-trace.png")
    assert shot.stat().st_size > 0
    page = operator.page
    rows = page.locator("svg a.span-row")
    await expect(rows).to_have_count(len(SYNTHETIC_SPANS))
    await expect(page.locator("svg a.span-row.error")).to_have_count(1)

    failed = rows.nth(FAILED_SPAN)
    span_id = await failed.get_attribute("data-span-id")
    await failed.click()
    picked = page.locator(f"#span-{span_id}")
    await expect(picked).to_contain_text("http.response.status_code")
    await expect(picked).not_to_contain_text("s3cr3t")
    assert page.url.endswith(f"#span-{span_id}")
    await operator.look("span picked")

    await operator.open("/traces/not-a-trace-id", status=400)
    await expect(page.get_by_text("invalid_trace_id")).to_be_visible()
    await operator.look("no trace id")
