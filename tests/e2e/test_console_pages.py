"""Every page of the console, in Chromium, with every permission: no console error or warning, no page
error, no failed request, no answer >= 400 other than the error page a visit asks for, every `pattern`
valid under the `v` flag (`tests/e2e/console_browser.py` checks all of it on every page of every console
test), no serious axe violation, no secret in any HTML.

The pages (`PAGES`: every GET route of the console, found in its source, must be listed there) and where
the suite visits each:

- every test: `/sign-in` (a redirect to the environment's ORY Hydra), Hydra's login page (the console's dev
  login `/oidc/login`), its consent (`/oidc/consent`, granted without a page) and the callback
  (`/oidc/callback`); `tests/e2e/test_console.py`: sign-out through Hydra's logout page (`/oidc/logout`);
- here, signed in with every permission (`test_every_page_with_every_permission`): overview `/`,
  the five `/services/<name>`, `/devices` (all, one tenant and site), `/devices/new`, `/devices/<id>`,
  `/sites` (empty, one site), `/orphans`, `/audit` (all, one device), `/inbox`, `/watchers`,
  `/watchers/all`, `/watchers/new`, `/watchers/<id>`, `/watchers/<id>/edit`, `/media` with the drain
  table; the htmx fragments those pages poll while something converges (`/devices/<id>/status`,
  `/devices/rows`, `/media/rows`), fetched and swapped in once as the poll does; and the error pages: the
  device form refused by Sense (422 `path_name_taken` beside the field), a device Sense does not know
  (404), a service the console does not know (404), a URL nobody serves (404), a device id that is no id
  (422);
- here, signed in without permissions: `/devices`, `/orphans`, `/audit`, `/watchers/all` as 403 pages
  naming the permission; and signed out, on Hydra's login page: a user id the browser refuses (the
  `pattern`) and the server refuses (422 `invalid_subject`);
- `tests/e2e/test_console.py`: the polls themselves while devices converge, the watcher form refused by
  signal-watcher (422 beside the URL), the watcher's test preview (htmx), the inbox marked read/unread,
  `/media/<id>` and its outputs (cover, the clip played), the upload proxy (`/media/uploads...`) with a
  chunk cancelled on purpose, the CSRF refusal page (403);
- every page loads `/static/console.css`, `/static/console.js`, `/static/favicon.svg` and
  `/static/vendor/htmx.min.js`.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

from tests.e2e.console_browser import Visitor, all_secrets, assert_nothing_secret_rendered
from tests.e2e.test_console import create_device
from tests.support.e2e_fixtures import Witness, camera_source
from tests.support.e2e_flows import Target
from yovision_platform.tools.environment import LocalEnvironment

ENTRYPOINTS = Path(__file__).resolve().parents[2] / "services/console/src/console/entrypoints"
GET_ROUTE = re.compile(r"""@(?:router|app)\.get\(\s*"([^"]+)\"""")
SERVICES = ("sense-reconciler", "orphan-scanner", "bell-receiver", "signal-watcher", "media-worker")
# Every GET route of the console -> the test that visits it (a page) or loads it (a fragment, an asset).
PAGES = {
    "/sign-in": "every test (sign-in: a redirect to Hydra)",
    "/oidc/login": "every test (Hydra's login page); 422: test_a_user_id_the_server_refuses_...",
    "/oidc/consent": "every test (Hydra's consent: accepted, a redirect)",
    "/oidc/callback": "every test (the end of each sign-in)",
    "/oidc/logout": "test_console.py::test_sign_out_ends_the_hydra_session_...",
    "/oidc/error": "test_every_page_with_every_permission (400)",
    "/": "test_every_page_with_every_permission",
    "/services/{name}": "test_every_page_with_every_permission (the five, and an unknown one: 404)",
    "/devices": "test_every_page_with_every_permission; 403: test_pages_without_their_permission_...",
    "/devices/new": "test_every_page_with_every_permission (and its 422)",
    "/devices/{device_id}": "test_every_page_with_every_permission (and an unknown device: 404)",
    "/devices/rows": "test_every_page_with_every_permission (htmx, as its poll does)",
    "/devices/{device_id}/status": "test_every_page_with_every_permission (htmx, as its poll does)",
    "/sites": "test_every_page_with_every_permission",
    "/orphans": "test_every_page_with_every_permission; 403: test_pages_without_their_permission_...",
    "/audit": "test_every_page_with_every_permission; 403: test_pages_without_their_permission_...",
    "/inbox": "test_every_page_with_every_permission",
    "/watchers": "test_every_page_with_every_permission",
    "/watchers/all": "test_every_page_with_every_permission; 403: test_pages_without_their_permission_...",
    "/watchers/new": "test_every_page_with_every_permission",
    "/watchers/{watcher_id}": "test_every_page_with_every_permission",
    "/watchers/{watcher_id}/edit": "test_every_page_with_every_permission",
    "/media": "test_every_page_with_every_permission",
    "/media/rows": "test_every_page_with_every_permission (htmx, as its poll does)",
    "/media/{material_id}": "test_console.py::test_an_upload_cancelled_mid_way_resumes_...",
    "/media/{material_id}/outputs/{kind}": "test_console.py::test_an_upload_cancelled_... (cover, clip)",
    "/traces/{trace_id}": "test_console_traces.py (a trace of five services; 400: an id that is no trace id)",
    "/static/{name}": "every page (console.css, console.js, favicon.svg)",
    "/static/vendor/{name}": "every page (htmx.min.js)",
}
WITHOUT_PERMISSION = {
    "/devices": "sense:operate",
    "/orphans": "orphan:read",
    "/audit": "bell:audit-read",
    "/watchers/all": "signal:read",
}


def test_every_get_route_of_the_console_is_listed_with_the_test_that_visits_it() -> None:
    routes = {r for f in ENTRYPOINTS.glob("*.py") for r in GET_ROUTE.findall(f.read_text(encoding="utf-8"))}
    assert {"/", "/sign-in", "/oidc/callback", "/media/{material_id}"} <= routes, (
        "the route scan found too little"
    )
    assert routes == set(PAGES), f"not listed: {routes - set(PAGES)}; gone: {set(PAGES) - routes}"


async def test_every_page_with_every_permission(
    env: LocalEnvironment, operator: Visitor, witness: Witness
) -> None:
    page = await operator.open("/")
    await page.get_by_role("rowheader", name="sense-reconciler").wait_for()
    await operator.look("overview")
    for service in SERVICES:
        await operator.open(f"/services/{service}")
        await operator.look(f"service-{service}")

    tenant, site, path = f"t-{uuid.uuid4().hex[:6]}", "site-tour", f"tour-{uuid.uuid4().hex[:8]}"
    device_id = await create_device(operator, tenant, site, path, camera_source(witness, "10.9.8.9"), False)
    await operator.look("device")
    await _poll_once(operator, f"/devices/{device_id}/status", "#device-status")
    await operator.open("/devices/new")
    await operator.look("device-form")
    await _refused_device_form(operator, tenant, site, path, camera_source(witness, "10.9.8.9"))
    for label, where in (
        ("devices", "/devices"),
        ("devices-of-a-site", f"/devices?tenant_id={tenant}&site_id={site}"),
        ("sites", "/sites"),
        ("site", f"/sites?tenant_id={tenant}&site_id={site}"),
        ("orphans", "/orphans"),
        ("audit", "/audit"),
        ("audit-of-a-device", f"/audit?source_system=sense&device_id={device_id}"),
        ("inbox", "/inbox"),
        ("media-with-drain-table", "/media"),
    ):
        await operator.open(where)
        await operator.look(label)
    await operator.open(f"/devices?tenant_id={tenant}&site_id={site}")
    await _poll_once(operator, f"/devices/rows?tenant_id={tenant}&site_id={site}&after=", "#device-rows")
    await operator.open("/media")
    await _poll_once(operator, "/media/rows", "#material-rows")

    async with Target() as target:
        target.answer_price(3)
        watcher = await _create_watcher(operator, target.url)
        await operator.look("watcher")
        for label, where in (
            ("watcher-edit", f"/watchers/{watcher}/edit"),
            ("watchers", "/watchers"),
            ("watchers-all", "/watchers/all"),
        ):
            await operator.open(where)
            await operator.look(label)

    for label, where, status in (
        ("unknown-device", f"/devices/{uuid.uuid4()}", 404),
        ("unknown-service", "/services/no-such-service", 404),
        ("unknown-url", "/no-such-page", 404),
        ("device-id-that-is-no-id", "/devices/not-an-id", 422),
        ("identity-provider-error", "/oidc/error?error=invalid_request&error_description=x7q", 400),
    ):
        await operator.open(where, status=status)
        assert await page.locator("p.error-code strong").inner_text() == str(status)
        assert "x7q" not in await page.content()
        await operator.look(label)


async def _poll_once(visitor: Visitor, fragment: str, target: str) -> None:
    """What the page's htmx poll does while something converges, done once now (the poll itself runs only
    while a device or a material is pending, which a test cannot hold still): fetch, swap, settle."""
    await visitor.page.evaluate(
        "([url, target]) => htmx.ajax('GET', url, {target, swap: 'outerHTML'})", [fragment, target]
    )
    await visitor.page.locator(target).wait_for(state="attached")
    await visitor.look(f"polled-{target[1:]}")


async def _refused_device_form(visitor: Visitor, tenant: str, site: str, path: str, source: str) -> None:
    """The same path name again: Sense refuses it, the form comes back with the code beside the field."""
    page = await visitor.open("/devices/new")
    await page.get_by_label("Tenant", exact=True).fill(tenant)
    await page.get_by_label("Site", exact=True).fill(site)
    await page.get_by_label("Name", exact=True).fill("a second camera")
    await page.get_by_label("MediaMTX path name", exact=True).fill(path)
    await page.get_by_label("Source URI", exact=True).fill(source)
    async with visitor.expect_document(422):
        await page.get_by_role("button", name="Create device").click()
        await page.locator("#path_name-error").wait_for()
    assert await page.locator("#path_name-error").inner_text() == "path_name_taken"
    await visitor.look("device-form-refused")


async def _create_watcher(visitor: Visitor, url: str) -> str:
    page = await visitor.open("/watchers/new")
    await visitor.look("watcher-form")
    await page.get_by_label("Name", exact=True).fill("tour watch")
    await page.get_by_label("Agent id", exact=True).fill("agent-tour")
    await page.get_by_label("URL", exact=True).fill(url)
    await page.get_by_label("Prompt template", exact=True).fill("{name}: {diff}")
    await page.get_by_role("button", name="Create watcher").click()
    await page.wait_for_url(re.compile(rf"{re.escape(visitor.base_url)}/watchers/[0-9a-f-]{{36}}$"))
    return page.url.rsplit("/", 1)[1]


async def test_pages_without_their_permission_are_403_pages_naming_it(user: Visitor) -> None:
    for where, permission in WITHOUT_PERMISSION.items():
        page = await user.open(where, status=403)
        assert permission in await page.locator("main").inner_text()
        await user.look(f"403{where}")


async def test_a_user_id_the_server_refuses_is_refused_in_the_browser_first(
    env: LocalEnvironment, visitor_factory: Any, witness: Witness
) -> None:
    """On Hydra's login page (the console's dev login): the field's `pattern` (valid under `v`, so the
    browser applies it) refuses what `POST /oidc/login` refuses; sent anyway (the form's validation turned
    off), the server answers its 422 page."""
    visitor: Visitor = await visitor_factory(env.url("console"), "signed-out")
    page = await visitor.at_the_login_page()
    subject, form = page.get_by_label("User id"), page.locator("form.form")
    for good in ("alice", "svc:op-1@example.org", "a" * 128):
        await subject.fill(good)
        assert await subject.evaluate("(field) => field.validity.valid"), good
    for bad in ("a b", "alice/bob", "é", "a\\b"):  # too long: maxlength stops the typing (unit-tested)
        await subject.fill(bad)
        assert await subject.evaluate("(field) => field.validity.patternMismatch"), bad
        assert not await form.evaluate("(form) => form.checkValidity()"), bad
    await form.evaluate("(form) => { form.noValidate = true; }")
    async with visitor.expect_document(422):
        await page.get_by_role("button", name="Sign in").click()
        await page.locator("#subject-error").wait_for()
    assert "invalid_subject" in await page.locator("#subject-error").inner_text()
    await visitor.look("sign-in-refused")
    await assert_nothing_secret_rendered(visitor, all_secrets(env, witness))
