"""The console in a real Chromium, on the services of the end-to-end environment (the same session `env`).

Covers: sign in, create a device, watch it converge, see its audit rows; disable a selection; the orphan
page with its classes and the copyable CLI command; a watcher created with a bad URL (error beside the
field), fixed, tested now and checked (check log); a browser upload with progress, then the clip plays;
the inbox; CSRF refusal; and no secret in any rendered page. Every page is screenshotted under
`.local/console-screenshots/` and checked with axe-core.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Witness, camera_source, eventually, run_cli, venv_bin
from tests.e2e.console_browser import Visitor, chromium, visitor_factory
from tests.e2e.test_watchers import Target
from yovision_platform.tools.environment import LocalEnvironment

__all__ = ["chromium", "visitor_factory"]

OPERATOR_PERMISSIONS = ("sense:operate", "orphan:read", "bell:audit-read", "signal:read", "media:drain")


@pytest.fixture
async def operator(env: LocalEnvironment, visitor_factory: Any, witness: Witness) -> AsyncIterator[Visitor]:
    witness.secrets.add(env.secret_file("sense-reconciler", "API_TOKEN_FILE").read_text().strip())
    visitor: Visitor = await visitor_factory(env.url("console"), "operator")
    await visitor.sign_in(f"op-{uuid.uuid4().hex[:6]}", *OPERATOR_PERMISSIONS)
    yield visitor
    assert_no_secret(visitor, witness)


def assert_no_secret(visitor: Visitor, witness: Witness) -> None:
    for html in visitor.pages_html:
        for secret in witness.secrets:
            assert secret not in html, f"a page shows a secret of {len(secret)} chars"


async def create_device(
    visitor: Visitor, tenant: str, site: str, path: str, source: str, enabled: bool
) -> str:
    page = await visitor.open("/devices/new")
    await page.get_by_label("Tenant", exact=True).fill(tenant)
    await page.get_by_label("Site", exact=True).fill(site)
    await page.get_by_label("Name", exact=True).fill(f"camera {path}")
    await page.get_by_label("MediaMTX path name", exact=True).fill(path)
    await page.get_by_label("Source URI", exact=True).fill(source)
    if enabled:
        await page.get_by_label("Enabled", exact=True).check()
    await page.get_by_role("button", name="Create device").click()
    await page.wait_for_url(f"{visitor.base_url}/devices/*")
    return page.url.rsplit("/", 1)[1]


async def test_sign_in_create_a_device_watch_it_converge_and_see_its_audit_rows(
    env: LocalEnvironment, operator: Visitor, witness: Witness
) -> None:
    page = await operator.open("/")
    await (
        page.get_by_role("cell", name="sense-reconciler")
        .or_(page.get_by_role("rowheader", name="sense-reconciler"))
        .wait_for()
    )
    await operator.look("overview")
    tenant, path = f"t-{uuid.uuid4().hex[:6]}", f"cam-{uuid.uuid4().hex[:8]}"
    device_id = await create_device(
        operator, tenant, "site-1", path, camera_source(witness, "10.9.8.7"), True
    )
    await page.locator('#device-status [data-status="converged"]').wait_for(timeout=60_000)
    await operator.look("device-converged")
    await page.get_by_role("link", name="This device's audit trail").click()
    await page.get_by_text("device.created").first.wait_for(timeout=60_000)
    summary = page.locator("ol.trail summary").first
    await summary.click()
    fact = await page.locator("pre.fact").first.inner_text()
    assert device_id in fact and "source_uri" in fact  # the changed field's name, never its value
    await operator.look("audit-trail-device")
    await operator.open("/services/sense-reconciler")
    await operator.look("service-details")
    narrow: Visitor = Visitor(operator.page, operator.base_url, operator.name + "-375")
    await operator.page.set_viewport_size({"width": 375, "height": 800})
    await narrow.open(f"/devices?tenant_id={tenant}")
    await narrow.look("devices-375px")
    await operator.page.set_viewport_size({"width": 1280, "height": 900})


async def test_disable_a_selection_of_devices(
    env: LocalEnvironment, operator: Visitor, witness: Witness
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:6]}"
    ids = [
        await create_device(
            operator,
            tenant,
            "site-2",
            f"sel-{uuid.uuid4().hex[:8]}",
            camera_source(witness, "10.9.8.8"),
            True,
        )
        for _ in range(3)
    ]
    page = await operator.open(f"/devices?tenant_id={tenant}&site_id=site-2")
    for device_id in ids[:2]:
        await page.locator(f"#sel-{device_id}").check()
    await operator.look("devices-selected")
    await page.get_by_role("button", name="Disable selected").click()
    await page.get_by_text("2 device(s) set to disabled.").wait_for()
    rows = page.locator("#device-rows tr")
    assert await rows.count() == 3
    for device_id in ids:
        row = page.locator("#device-rows tr", has=page.locator(f"#sel-{device_id}"))
        expected = "disabled" if device_id in ids[:2] else "enabled"
        assert expected in await row.locator("td").nth(2).inner_text()
    await operator.open(f"/sites?tenant_id={tenant}&site_id=site-2")
    await operator.page.get_by_label("Maximum enabled video devices (1..128)", exact=True).fill("8")
    await operator.page.get_by_role("button", name="Save limit").click()
    await operator.page.get_by_text("Site limit saved.").wait_for()
    await operator.look("site-limit")


async def test_the_orphan_page_shows_classes_gate_and_the_exact_cli_command(
    env: LocalEnvironment, operator: Visitor
) -> None:
    code, out, err = await run_cli(env, "orphan-scanner", venv_bin("sense-orphan"), "report")
    assert code == 0, err
    report = json.loads(out)
    page = await operator.open("/orphans")
    await page.get_by_text(report["scan_id"]).first.wait_for()
    counts = await page.locator("ul.counts").inner_text()
    for name in ("in_use", "owned_stale", "unowned"):
        assert (
            f"{report['counts'][name]}\n{name}" in counts
            or f"{report['counts'][name]} {name}" in counts.replace("\n", " ")
        )
    if report["candidates"]:
        assert await page.locator("#apply-command").inner_text() == report["apply"]
        assert await page.locator("#confirm-text").inner_text() == report["confirm"]
    assert "\u00d7 100" in await page.locator("table.gate").inner_text()
    await operator.look("orphans")


async def test_a_watcher_with_a_bad_url_then_fixed_tested_and_checked(
    env: LocalEnvironment, visitor_factory: Any, witness: Witness
) -> None:
    user: Visitor = await visitor_factory(env.url("console"), "user")
    await user.sign_in(f"u-{uuid.uuid4().hex[:6]}")
    async with Target() as target:
        target.answer_price(41)
        page = await user.open("/watchers/new")
        await page.get_by_label("Name", exact=True).fill("price watch")
        await page.get_by_label("Agent id", exact=True).fill("agent-7")
        await page.get_by_label("URL", exact=True).fill("ftp://example.invalid/file")
        secret_header = f"hv-{uuid.uuid4().hex}"
        witness.secrets.add(secret_header)
        await page.get_by_label("Key 1", exact=True).fill("Authorization")
        await page.get_by_label("Value 1", exact=True).fill(secret_header)
        await page.get_by_label("Prompt template", exact=True).fill("Price changed at {url}: {diff}")
        await page.get_by_role("button", name="Create watcher").click()
        error = page.locator("#url-error")
        await error.wait_for()
        assert await page.get_by_label("URL", exact=True).get_attribute("aria-invalid") == "true"
        await user.look("watcher-bad-url")
        await page.get_by_label("URL", exact=True).fill(target.url)
        await page.get_by_label("Value 1", exact=True).fill(secret_header)
        await page.get_by_role("button", name="Create watcher").click()
        await page.wait_for_url(f"{user.base_url}/watchers/*")
        await page.get_by_role("button", name="Test now").click()
        await page.locator("#preview-result").wait_for()
        assert "ok" in await page.locator("#preview-result").inner_text()
        await user.look("watcher-test-now")
        await page.get_by_role("button", name="Check now").click()

        async def logged() -> bool:
            await page.reload()
            return await page.locator("table tbody tr td:nth-child(2)", has_text="200").count() > 0

        await eventually(logged, what="a check in the log")
        await user.look("watcher-check-log")
        await user.open("/watchers")
        await user.look("watchers")
        await user.open("/inbox")
        await user.page.get_by_role("heading", name="Inbox").wait_for()
        await user.look("inbox")
    assert_no_secret(user, witness)


async def test_upload_a_video_see_progress_and_play_the_clip(
    env: LocalEnvironment, operator: Visitor, source_video: Path
) -> None:
    page = await operator.open("/media")
    await page.get_by_label("Video file", exact=True).set_input_files(str(source_video))
    await page.get_by_label("Title", exact=True).fill("browser upload")
    await page.get_by_role("button", name="Upload").click()
    await page.wait_for_url(f"{operator.base_url}/media/*", timeout=120_000)
    material = page.url.rsplit("/", 1)[1]

    async def done() -> bool:
        await page.reload()
        return await page.locator('[data-status="done"]').count() > 0

    await eventually(done, within=180, what="the transcode")
    clip = page.locator("#clip")
    await clip.wait_for()
    playing = await clip.evaluate(
        """async (video) => { video.muted = true; await video.play();
             await new Promise((ok) => setTimeout(ok, 500));
             return video.currentTime > 0 && !video.error; }"""
    )
    assert playing
    await operator.look("material-playing")
    await operator.open("/media")
    assert await page.locator(f'a[href="/media/{material}"]').count() == 1
    await operator.look("media")


async def test_a_form_without_its_csrf_token_is_refused(env: LocalEnvironment, operator: Visitor) -> None:
    await operator.open("/devices")
    await operator.look("devices")
    refused = await operator.page.request.post(
        operator.base_url + "/devices/batch",
        form={"desired_state": "disabled", "device_id": str(uuid.uuid4())},
    )
    assert refused.status == 403 and "csrf_failed" in await refused.text()
    forged = await operator.page.request.post(
        operator.base_url + "/devices/batch", form={"csrf": "x" * 43, "desired_state": "disabled"}
    )
    assert forged.status == 403
    async with httpx.AsyncClient(base_url=env.url("console")) as anonymous:
        assert (await anonymous.get("/devices")).status_code == 303
