"""The console in a real Chromium, on the services of the end-to-end environment (the same session `env`).

Covers: sign in through Hydra, create a device, watch it converge, see its audit rows naming the user who
signed in (the `sub` of the user's own token, nothing a header said); sign-out ending Hydra's session too;
a refresh before expiry and a revoked refresh token (the console restarted with a refresh margin beyond the
tokens' life); disable a selection; the orphan
page with a staged candidate, its classes, gate and the command block copied in the browser (then run: it
deletes exactly that path); a watcher created with a bad URL (error beside the field), fixed, tested now
and checked (check log); the watcher form's "Test" before saving (create and edit); a watcher
auto-disabled by failures, its WATCHER_DISABLED notification in the inbox marked read and unread, then
re-enabled; a browser upload cancelled mid-way and resumed after a page reload, then the clip plays;
keyboard-only sign-in with visible focus; CSRF refusal (a forged form sent by the browser: the 403 page).
Every page is screenshotted under `.local/console-screenshots/`, checked with axe-core under the page's own
CSP, and no secret of the environment or of a test (nor any JWT) may appear in any HTML the console sent.
Every tab fails its test on any browser error or warning (`tests/e2e/console_browser.py`);
`tests/e2e/test_console_pages.py` visits every page and lists them.
"""

from __future__ import annotations

import json
import shlex
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Page, Request, Route
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.console_browser import SESSION_COOKIE, Visitor, all_secrets, assert_nothing_secret_rendered
from tests.e2e.test_orphans import IN_USE_DEVICES
from tests.e2e.test_watchers import FAILURES_TO_DISABLE, Target
from tests.support.e2e_fixtures import (
    FLOW_TIMEOUT_SECONDS,
    MEDIA_SERVERS,
    Witness,
    camera_source,
    device_body,
    eventually,
    orphan_report,
    run_cli,
    venv_bin,
)
from yovision_platform.tools.environment import LocalEnvironment

UPLOAD_CHUNK_BYTES = 1024 * 1024  # static/console.js
CHECK_ROWS = "table.check-log tbody tr.check-row"  # a watcher page's check log, a row per check
FORCED_REFRESH_MARGIN_SECONDS = 3600  # CONSOLE_REFRESH_MARGIN_SECONDS' maximum: beyond a token's 15 minutes


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
    # Bell's row names the user who signed in at Hydra: the token's `sub`, as Sense recorded it
    assert (await summary.inner_text()).endswith(f"by {operator.subject}"), await summary.inner_text()
    await summary.click()
    fact = await page.locator("pre.fact").first.inner_text()
    assert device_id in fact and "source_uri" in fact  # the changed field's name, never its value
    await operator.look("audit-trail-device")
    await operator.open("/services/sense-reconciler")
    await operator.look("service-details")
    await operator.page.set_viewport_size({"width": 375, "height": 800})
    await operator.open(f"/devices?tenant_id={tenant}")
    await operator.look("devices-375px")
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
    # While a device converges the page swaps its rows in anew every 2 s; a selection must outlive that (it
    # did not: a swap between the checks and the click sent an empty selection). Swap them now, as it does.
    await refresh_device_rows(page, f"/devices/rows?tenant_id={tenant}&site_id=site-2&after=")
    for device_id in ids:
        assert await page.locator(f"#sel-{device_id}").is_checked() == (device_id in ids[:2])
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


async def refresh_device_rows(page: Page, url: str) -> None:
    """What the rows' `every 2s` trigger does (a GET of `url` swapped over `#device-rows`), at once, through
    the page's own htmx; returns once the new rows are in."""
    await page.evaluate("document.getElementById('device-rows').dataset.before = 'swap'")
    await page.evaluate("url => htmx.ajax('GET', url, {target: '#device-rows', swap: 'outerHTML'})", url)
    await page.locator("#device-rows:not([data-before])").wait_for(state="attached")


async def _stage_stale_path(
    env: LocalEnvironment, sense: httpx.AsyncClient, mediamtx: httpx.AsyncClient, witness: Witness
) -> str:
    """As tests/e2e/test_orphans.py does: live devices (so the gate's ratio holds) and one disabled device
    whose path someone re-added by hand: Sense once owned it, no device claims it now."""
    tenant, site = "tenant-console-orphan", f"site-{uuid.uuid4().hex[:6]}"
    live = [f"corph-live-{uuid.uuid4().hex[:8]}" for _ in range(IN_USE_DEVICES)]
    for n, path in enumerate(live):
        body = device_body(tenant, site, path, camera_source(witness, f"10.4.0.{n + 1}"))
        assert (await sense.post("/v1/devices", json=body)).status_code == 201
    stale = f"corph-stale-{uuid.uuid4().hex[:8]}"
    created = await sense.post("/v1/devices", json=device_body(tenant, site, stale, "rtsp://10.4.1.1:554/s"))
    device_id = created.json()["id"]

    async def configured(names: list[str], present: bool) -> bool:
        found = [await mediamtx.get(f"/v3/config/paths/get/{n}") for n in names]
        return all((r.status_code == 200) == present for r in found)

    await eventually(lambda: configured([*live, stale], True), what="the devices' paths configured")
    disabled = await sense.put(f"/v1/devices/{device_id}/desired-state", json={"desired_state": "disabled"})
    assert disabled.status_code == 200
    await eventually(lambda: configured([stale], False), what="Sense removed the disabled device's path")
    added = await mediamtx.post(f"/v3/config/paths/add/{stale}", json={"source": "rtsp://10.4.1.1:554/s"})
    assert added.status_code == 200
    return stale


async def test_the_orphan_page_shows_a_candidate_its_gate_and_the_command_to_copy(
    env: LocalEnvironment,
    operator: Visitor,
    sense: httpx.AsyncClient,
    mediamtx: httpx.AsyncClient,
    witness: Witness,
) -> None:
    stale = await _stage_stale_path(env, sense, mediamtx, witness)

    async def reported() -> dict[str, Any] | None:
        scan = await orphan_report(env)
        expected = [{"media_server_id": MEDIA_SERVERS[0], "path_name": stale}]
        return scan if scan["candidates"] == expected else None

    report = await eventually(reported, what="a report with the staged candidate")
    page = await operator.open("/orphans")
    await page.get_by_text(report["scan_id"]).first.wait_for()
    counts = (await page.locator("ul.counts").inner_text()).replace("\n", " ")
    for name in ("in_use", "owned_stale", "unowned"):
        assert f"{report['counts'][name]} {name}" in counts, (name, counts)
    assert await page.locator("table.gate").get_by_text("holds").count() == 3
    assert await page.get_by_role("cell", name=stale).count() == 1
    command = page.locator("#apply-command")
    assert await command.inner_text() == report["apply"]
    assert await page.locator("#confirm-text").inner_text() == report["confirm"]
    assert report["scan_id"] in report["apply"] and report["confirm"] in report["apply"]
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=operator.base_url)
    await page.get_by_role("button", name="Copy command").click()
    await page.get_by_role("button", name="Copied").wait_for()
    copied = await page.evaluate("() => navigator.clipboard.readText()")
    assert copied == report["apply"]
    await operator.look("orphans-with-candidate")
    # The console never deletes: the operator runs the copied command, with a name in place of <your-name>.
    program, *arguments = shlex.split(copied.replace("<your-name>", "console-e2e"))
    assert program == "sense-orphan" and arguments[0] == "apply"
    code, out, err = await run_cli(env, "orphan-scanner", venv_bin(program), *arguments)
    assert code == 0, err
    assert [(i["path_name"], i["outcome"]) for i in json.loads(out)["items"]] == [(stale, "deleted")]


async def test_a_watcher_with_a_bad_url_then_fixed_tested_and_checked(
    env: LocalEnvironment, user: Visitor, witness: Witness
) -> None:
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
        async with user.expect_document(422):  # the form again, the API's refusal beside the field
            await page.get_by_role("button", name="Create watcher").click()
            await page.locator("#url-error").wait_for()
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
        # the scheduler checks a new watcher at once, so "Check now" may first be refused (5 s spacing)
        await page.reload()
        rows = await page.locator(CHECK_ROWS).count()
        await _check_now_until_recorded(page, rows)
        assert await page.locator("table.check-log tbody tr td:nth-child(2)", has_text="200").count() > 0
        await user.look("watcher-check-log")
        await user.open("/watchers")
        await user.look("watchers")


async def _check_now_until_recorded(page: Page, rows_before: int) -> None:
    """Press "Check now" until the API accepts it (5 s spacing), then wait for its row in the log."""

    async def accepted() -> bool:
        await page.get_by_role("button", name="Check now").click()
        return await page.get_by_text("Check requested").count() > 0

    await eventually(accepted, what="a check accepted")

    async def recorded() -> bool:
        await page.reload()
        return await page.locator(CHECK_ROWS).count() > rows_before

    await eventually(recorded, what="the check in the log")


async def _check_now_until_disabled(page: Page) -> None:
    """Press "Check now" until the failed checks disable the watcher.

    The scheduler checks a new watcher at once, and a press while a check is already due adds none, so the
    presses are not counted: the watcher's own badge says when the failure limit is reached.
    """

    async def disabled() -> bool:
        await page.reload()
        if await page.locator("h1 .badge", has_text="DISABLED").count() > 0:
            return True
        # refused (429) within 5 s of the last check, and (409) once the watcher is disabled: harmless
        await page.get_by_role("button", name="Check now").click()
        return False

    # the failure limit's checks, 5 s apart at least, take 25 s on an idle machine
    await eventually(disabled, within=2 * FLOW_TIMEOUT_SECONDS, what="the watcher disabled by failures")


async def test_the_watcher_form_previews_the_judged_value_before_saving(
    env: LocalEnvironment, user: Visitor, witness: Witness
) -> None:
    """The form's "Test" (htmx in the browser; its no-JavaScript form post is covered by
    tests/unit/console/test_watcher_form.py): a refused path shows its code and meaning, a good one the
    judged value, nothing is saved until "Create watcher"; the edit form tests the edit with the stored
    secret header."""
    async with Target() as target:
        target.answer_price(73)
        page = await user.open("/watchers/new")
        await page.get_by_label("Name", exact=True).fill("previewed watch")
        await page.get_by_label("Agent id", exact=True).fill("agent-9")
        await page.get_by_label("URL", exact=True).fill(target.url)
        secret_header = f"hv-{uuid.uuid4().hex}"
        witness.secrets.add(secret_header)
        await page.get_by_label("Key 1", exact=True).fill("Authorization")
        await page.get_by_label("Value 1", exact=True).fill(secret_header)
        await page.get_by_label("Compare", exact=True).select_option("JSON_FIELD")
        await page.get_by_label("JSON path (JSON_FIELD)", exact=True).fill("$..price")
        await page.get_by_label("Prompt template", exact=True).fill("{name}: {diff}")
        test = page.get_by_role("button", name="Test", exact=True)
        await test.click()
        result = page.locator("#form-preview-result")
        await result.get_by_text("invalid_json_path").wait_for()
        assert "dotted" in await result.inner_text()  # the code's meaning
        assert target.requests == 0
        await user.look("watcher-form-test-refused")
        await page.get_by_label("JSON path (JSON_FIELD)", exact=True).fill("$.data.price")
        await test.click()
        await result.locator("code.judged-value", has_text="73").wait_for()
        assert "no (first check: baseline)" in await result.inner_text()
        assert target.requests == 1 and page.url == f"{user.base_url}/watchers/new"
        await user.look("watcher-form-test-judged")
        other_tab = await page.context.new_page()  # the form stays as typed in its own tab
        await other_tab.goto(f"{user.base_url}/watchers")
        assert await other_tab.get_by_text("No watchers yet.").count() == 1  # tested, not saved
        await other_tab.close()
        await page.get_by_role("button", name="Create watcher").click()
        await page.wait_for_url(f"{user.base_url}/watchers/*")
        assert (await page.locator("h1").inner_text()).startswith("previewed watch")
        await page.get_by_role("link", name="Edit").click()
        await page.get_by_label("JSON path (JSON_FIELD)", exact=True).wait_for()
        assert await page.get_by_label("JSON path (JSON_FIELD)", exact=True).input_value() == "data.price"
        target.answer_price(74)
        await page.get_by_role("button", name="Test", exact=True).click()
        edited = page.locator("#form-preview-result")
        await edited.locator("code.judged-value", has_text="74").wait_for()
        await user.look("watcher-edit-form-test")
    listed = await user.open("/watchers")
    assert await listed.locator("tbody tr", has_text="previewed watch").count() == 1


async def test_a_watcher_disabled_by_failures_reaches_the_inbox_read_unread_and_is_re_enabled(
    env: LocalEnvironment, user: Visitor
) -> None:
    async with Target() as target:
        target.answer_text("not json")
        page = await user.open("/watchers/new")
        await page.get_by_label("Name", exact=True).fill("failing watch")
        await page.get_by_label("Agent id", exact=True).fill("agent-8")
        await page.get_by_label("URL", exact=True).fill(target.url)
        await page.get_by_label("Compare", exact=True).select_option("JSON_FIELD")
        await page.get_by_label("JSON path (JSON_FIELD)", exact=True).fill("data.price")
        await page.get_by_label("Prompt template", exact=True).fill("{name}: {diff}")
        await page.get_by_role("button", name="Create watcher").click()
        await page.wait_for_url(f"{user.base_url}/watchers/*")
        watcher_url = page.url
        await _check_now_until_disabled(page)
        rows = await page.locator(CHECK_ROWS).count()
        assert rows == FAILURES_TO_DISABLE, "the watcher is disabled by exactly its failure limit"
        await user.look("watcher-disabled")

    inbox = await user.open("/inbox")

    async def notified() -> bool:
        await inbox.reload()
        return await inbox.get_by_text("WATCHER_DISABLED").count() > 0

    await eventually(notified, what="WATCHER_DISABLED in the inbox")
    note = inbox.locator("ul.inbox li", has_text="failing watch")
    assert "unread" in await note.locator(".badge").inner_text()
    assert f"{FAILURES_TO_DISABLE} failed checks" in await note.inner_text()
    await user.look("inbox-unread")
    await note.get_by_role("button", name="Mark read").click()
    await inbox.locator("ul.inbox li.read", has_text="failing watch").wait_for()
    await user.look("inbox-read")
    await (
        inbox.locator("ul.inbox li", has_text="failing watch")
        .get_by_role("button", name="Mark unread")
        .click()
    )
    await inbox.locator("ul.inbox li.unread", has_text="failing watch").wait_for()

    await (
        inbox.locator("ul.inbox li", has_text="failing watch")
        .get_by_role("link", name="failing watch")
        .click()
    )
    assert page.url == watcher_url
    await page.get_by_role("button", name="Re-enable").click()
    await page.get_by_text("Watcher active.").wait_for()
    assert await page.locator("h1 .badge").inner_text() == "ACTIVE"


async def test_an_upload_cancelled_mid_way_resumes_after_a_reload_then_the_clip_plays(
    env: LocalEnvironment, operator: Visitor, source_video: Path
) -> None:
    chunks = -(-source_video.stat().st_size // UPLOAD_CHUNK_BYTES)  # noqa: ASYNC240 - one stat, no I/O wait
    assert chunks >= 2, "the video must span two chunks to cancel between them"
    page = operator.page
    sent: list[str] = []
    held: list[Route] = []

    def on_request(request: Request) -> None:
        if request.method == "PUT" and "/chunks/" in request.url:
            sent.append(request.url.rsplit("/", 1)[1])

    async def hold_last_chunk(route: Route) -> None:
        held.append(route)  # never answered: the browser's Cancel aborts it

    page.on("request", on_request)
    await page.route(f"**/media/uploads/*/chunks/{chunks - 1}", hold_last_chunk)
    await operator.open("/media")
    await page.get_by_label("Video file", exact=True).set_input_files(str(source_video))
    await page.get_by_label("Title", exact=True).fill("resumed upload")
    async with operator.expect_abort(f"/chunks/{chunks - 1}"):  # the held chunk, cancelled by the user
        await page.get_by_role("button", name="Upload").click()
        await eventually(lambda: _true(bool(held)), what="the last chunk in flight")
        assert await page.locator("#upload-status").inner_text() == f"uploading {chunks - 1}/{chunks}"
        await operator.look("upload-in-flight", idle=False)
        await page.get_by_role("button", name="Cancel").click()
        await page.get_by_text("cancelled (choose the file again to resume)").wait_for()
    await operator.look("upload-cancelled")
    await page.unroute(f"**/media/uploads/*/chunks/{chunks - 1}")

    await page.reload()
    sent.clear()
    await page.get_by_label("Video file", exact=True).set_input_files(str(source_video))
    await page.get_by_role("button", name="Upload").click()
    await page.wait_for_url(f"{operator.base_url}/media/*", timeout=120_000)
    assert sent == [str(chunks - 1)], f"after the reload only the missing chunk is sent, not {sent}"
    material = page.url.rsplit("/", 1)[1]

    async def done() -> bool:
        await page.reload()
        return await page.locator('[data-status="done"]').count() > 0

    await eventually(done, within=180, what="the transcode")
    clip = page.locator("#clip")
    await clip.wait_for()
    playing = await clip.evaluate(
        """async (video) => { video.muted = true; await video.play();
             await new Promise((ok) => { if (video.currentTime > 0) ok(); else video.ontimeupdate = ok; });
             return video.currentTime > 0 && !video.error; }"""
    )
    assert playing
    await operator.look("material-playing")
    await operator.open("/media")
    assert await page.locator(f'a[href="/media/{material}"]').count() == 1
    await operator.look("media")


async def _true(value: bool) -> bool:
    return value


async def test_sign_in_with_the_keyboard_alone_with_a_visible_focus(
    env: LocalEnvironment, visitor_factory: Any, witness: Witness
) -> None:
    visitor: Visitor = await visitor_factory(env.url("console"), "keyboard")
    page = await visitor.at_the_login_page()
    focus_of = """() => { const e = document.activeElement; const s = getComputedStyle(e);
        return {tag: e.tagName, id: e.id, text: (e.textContent || '').trim(), outline: s.outlineStyle,
                width: parseFloat(s.outlineWidth), visible: e.getBoundingClientRect().left >= 0}; }"""
    await page.keyboard.press("Tab")
    skip = await page.evaluate(focus_of)
    assert skip["text"] == "Skip to content" and skip["visible"], skip
    assert skip["outline"] != "none" and skip["width"] >= 2, skip
    await page.keyboard.press("Enter")
    await page.keyboard.press("Tab")
    field = await page.evaluate(focus_of)
    assert field["id"] == "subject" and field["outline"] != "none" and field["width"] >= 2, field
    await page.keyboard.type(f"kb-{uuid.uuid4().hex[:6]}")
    await page.keyboard.press("Tab")
    assert (await page.evaluate(focus_of))["id"] == "perm-1"  # sense:operate
    await page.keyboard.press("Space")
    await visitor.look("keyboard-focus-on-a-permission")
    for _ in range(10):  # on through the other permissions to the button
        await page.keyboard.press("Tab")
        focused = await page.evaluate(focus_of)
        if focused["tag"] == "BUTTON":
            break
    assert focused["text"] == "Sign in" and focused["outline"] != "none", focused
    await page.keyboard.press("Enter")
    await page.wait_for_url(visitor.base_url + "/")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    link = await page.evaluate(focus_of)
    assert link["tag"] == "A" and link["outline"] != "none", link
    await visitor.look("keyboard-focus-in-the-menu")
    assert await page.get_by_role("link", name="Devices").count() == 1  # the permission was chosen
    await assert_nothing_secret_rendered(visitor, all_secrets(env, witness))


async def test_a_form_without_its_csrf_token_is_refused(env: LocalEnvironment, operator: Visitor) -> None:
    page = await operator.open("/devices")
    await operator.look("devices")
    await page.locator("form.who input[name=csrf]").evaluate("(field) => { field.value = 'x'.repeat(43); }")
    async with operator.expect_document(403):  # a forged sign-out, sent by the browser: the error page
        await page.get_by_role("button", name="Sign out").click()
        await page.get_by_text("csrf_failed").wait_for()
    await operator.look("csrf-refused")
    await operator.open("/devices")  # still signed in
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


# --- signing out, refreshing, revoking: the console and the environment's Hydra -------------------------


async def test_sign_out_ends_the_hydra_session_so_signing_in_asks_for_the_login_again(
    env: LocalEnvironment, visitor_factory: Any, witness: Witness
) -> None:
    visitor: Visitor = await visitor_factory(env.url("console"), "sign-out")
    subject = f"so-{uuid.uuid4().hex[:6]}"
    await visitor.sign_in(subject, "signal:read")
    # The control: the console's session gone, Hydra's alive: Hydra remembers the login and fixes the user.
    await visitor.page.context.clear_cookies(name=SESSION_COOKIE)
    page = await visitor.at_the_login_page()
    assert await page.get_by_label("User id").count() == 0
    await page.get_by_text(f"remembers your sign-in as {subject}").wait_for()
    await visitor.look("login-remembered-by-hydra")
    await visitor.choose_and_sign_in("signal:read")
    await page.get_by_role("button", name="Sign out").click()  # revokes, then Hydra's logout page
    await page.wait_for_url(f"{visitor.base_url}/oidc/login?login_challenge=*")
    await page.get_by_label("User id").wait_for()  # a fresh login: Hydra's session ended
    assert await page.get_by_text("remembers your sign-in").count() == 0
    await visitor.look("login-after-sign-out")
    async with httpx.AsyncClient(base_url=env.url("console")) as anonymous:
        assert (await anonymous.get("/watchers")).status_code == 303
    await assert_nothing_secret_rendered(visitor, all_secrets(env, witness))


async def _refreshes(env: LocalEnvironment) -> dict[str, float]:
    async with httpx.AsyncClient(base_url=env.url("console"), timeout=10) as http:
        text = (await http.get("/metrics")).text
    return {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "console_token_refreshes_total"
    }


@pytest.fixture
async def refreshing_console(env: LocalEnvironment) -> AsyncIterator[None]:
    """The console restarted with a refresh margin beyond the tokens' life (Hydra's access tokens live 15
    minutes, which no test shortens): every request refreshes, so what a refresh does shows at once."""
    env.set_setting("console", "CONSOLE_REFRESH_MARGIN_SECONDS", str(FORCED_REFRESH_MARGIN_SECONDS))
    await env.stop("console")
    await env.start("console")
    try:
        yield
    finally:
        env.set_setting("console", "CONSOLE_REFRESH_MARGIN_SECONDS", None)
        await env.stop("console")
        await env.start("console")


async def test_a_token_is_refreshed_before_expiry_and_the_services_take_the_new_one(
    env: LocalEnvironment, refreshing_console: None, visitor_factory: Any, witness: Witness
) -> None:
    visitor: Visitor = await visitor_factory(env.url("console"), "refresh")
    await visitor.sign_in(f"rf-{uuid.uuid4().hex[:6]}", "sense:operate", "bell:audit-read")
    before = await _refreshes(env)
    for path in ("/devices", "/audit", "/watchers"):  # Sense, Bell, signal-watcher: each with a new token
        await visitor.open(path)
        await visitor.look(f"refreshed-{path[1:]}")
    after = await _refreshes(env)
    assert after["refreshed"] >= before["refreshed"] + 3, (before, after)
    assert after["refused"] == before["refused"] and after["failed"] == before["failed"]
    # each refresh used the newest refresh token (a reused one would have made Hydra revoke them all)
    await visitor.open("/devices")
    assert visitor.page.url == f"{visitor.base_url}/devices"
    await assert_nothing_secret_rendered(visitor, all_secrets(env, witness))


async def test_a_revoked_refresh_token_sends_the_user_to_sign_in(
    env: LocalEnvironment, refreshing_console: None, visitor_factory: Any
) -> None:
    visitor: Visitor = await visitor_factory(env.url("console"), "revoked")
    subject = f"rv-{uuid.uuid4().hex[:6]}"
    await visitor.sign_in(subject, "signal:read")
    before = await _refreshes(env)
    admin = env.env_of("console")["CONSOLE_DEV_LOGIN_ADMIN_URL"]
    async with httpx.AsyncClient(base_url=admin, timeout=10) as hydra_admin:  # an administrator revokes
        revoked = await hydra_admin.delete(
            "/admin/oauth2/auth/sessions/consent", params={"subject": subject, "all": "true"}
        )
    assert revoked.status_code == 204, revoked.status_code
    await visitor.open("/watchers")  # the refresh is refused: the session ends, on to sign in again
    assert visitor.page.url.startswith(f"{visitor.base_url}/oidc/login?login_challenge="), visitor.page.url
    await visitor.look("revoked-then-sign-in")
    after = await _refreshes(env)
    assert after["refused"] == before["refused"] + 1, (before, after)
