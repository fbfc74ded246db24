"""The browser side of the console tests: Debian's Chromium driven by Playwright, one page per test.

Chromium is launched by its path (Playwright's own browser download cannot work here) with a fresh profile.
The page's Content-Security-Policy stays in force (no ``bypass_csp``): a page whose own script, style or
asset the policy blocks would look fine in a bypassing test and be broken for users, so every page also
reports its CSP violations (a listener installed before any page script) and a test fails on one.

Every page a test looks at is saved as a screenshot under `.local/console-screenshots/` and checked with
axe-core: no serious or critical violation. axe is evaluated into the page through the DevTools protocol
(`page.evaluate` of its source from the console's node_modules), which is the test driver acting, not the
page loading a script: the CSP governs what the page loads and runs, so it neither needs relaxing nor
blocks this, and the console serves no test-only asset.

The HTML of every document and htmx fragment the console sends is kept, so a test can prove that no
secret was ever rendered.

Users sign in as they do in the local stack: `/sign-in` sends the browser to the environment's ORY Hydra,
which sends it to its login page (the console's dev login: a user id and permissions), then through the
consent back to the console's callback (`Visitor.sign_in`). Hydra's answers are redirects only; a page of
Hydra's own (an error) would fail the test as any unexpected document does.

Every tab also records what the browser reported (`tests/e2e/browser_log.py`): console messages, page
errors, failed requests, answers >= 400, and any `pattern` attribute that does not compile under the `v`
flag, checked in the page on every document and htmx swap. Any error or warning among them fails the test,
at each `look()` and, for everything a test did after its last look, when the test ends; the failure lists
what was reported and every console message. A test that provokes an error on purpose says so with
`expect_document(status)` / `open(path, status=...)` or `expect_abort(url_suffix)`, and nothing else is
excused.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, BrowserContext, Page, Response, async_playwright
from playwright.async_api import Error as PlaywrightError

from tests.e2e.browser_log import PageLog
from tests.support.e2e_fixtures import Witness
from yovision_platform.tools.doctor import secrets_of
from yovision_platform.tools.environment import LocalEnvironment

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
AXE = REPO_ROOT / "services" / "console" / "node_modules" / "axe-core" / "axe.min.js"
SCREENSHOTS = REPO_ROOT / ".local" / "console-screenshots"
BLOCKING_IMPACTS = ("serious", "critical")
TIMEOUT_MS = 30_000
CSP_LISTENER = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  const where = `${e.sourceFile || ""}:${e.lineNumber}`;
  window.__cspViolations.push(`${e.effectiveDirective} blocked ${e.blockedURI || "inline"} (${where})`);
});
"""
OPERATOR_PERMISSIONS = ("sense:operate", "orphan:read", "bell:audit-read", "signal:read", "media:drain")
SESSION_COOKIE = "yv_session"
JWT_PATTERN = re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{20,}")


@pytest.fixture(scope="session")
async def chromium() -> AsyncIterator[Browser]:
    """Playwright gives each `launch` a fresh temporary profile (its own --user-data-dir, removed on close);
    it refuses the flag from the caller, so the profile is fresh without it. Each user gets its own context
    (cookies apart)."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        yield browser
        await browser.close()


@pytest.fixture(scope="session")
def axe_source() -> str:
    return AXE.read_text(encoding="utf-8")


@dataclass
class Visitor:
    """One browser tab of one signed-in user, recording every HTML answer the console sent it."""

    page: Page
    base_url: str
    name: str
    axe: str
    log: PageLog
    pages_html: list[str] = field(default_factory=list)
    subject: str | None = None
    shots: int = 0
    lost: int = 0
    _reads: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.page.on("response", self._on_response)

    @classmethod
    async def create(cls, page: Page, base_url: str, name: str, axe: str) -> Visitor:
        log = PageLog(page)
        await log.install()
        return cls(page, base_url, name, axe, log)

    def _on_response(self, response: Response) -> None:
        if response.url.startswith(self.base_url) and "text/html" in response.headers.get("content-type", ""):
            self._reads.append(asyncio.ensure_future(self._keep(response)))

    async def _keep(self, response: Response) -> None:
        if 300 <= response.status < 400:  # a redirect has no body
            return
        try:
            self.pages_html.append(await response.text())
        except PlaywrightError:  # a polled fragment still in flight when the tab navigated away: gone
            self.lost += 1

    async def html(self) -> list[str]:
        """Every HTML body received so far (documents and htmx fragments), plus the pages looked at."""
        await asyncio.gather(*self._reads)
        return self.pages_html

    async def open(self, path: str, *, status: int = 200) -> Page:
        """Go to `path`, whose document must answer `status` (an error status: a deliberate error page)."""
        if status < 400:
            response = await self.page.goto(self.base_url + path)
        else:
            async with self.expect_document(status):
                response = await self.page.goto(self.base_url + path)
        assert response is not None and response.status == status, f"{path}: {response and response.status}"
        return self.page

    def expect_document(self, status: int) -> AbstractAsyncContextManager[None]:
        """``async with``: the main document answers `status` inside the block, on purpose."""
        return self.log.expect_document(status)

    def expect_abort(self, url_suffix: str) -> AbstractAsyncContextManager[None]:
        """``async with``: a request to ``...url_suffix`` sent inside the block is cancelled on purpose."""
        return self.log.expect_abort(url_suffix)

    def assert_quiet(self, label: str, *, final: bool = False) -> None:
        """No error or warning reported by the browser so far (on any page of this tab); when `final`, every
        error the test said it provokes did happen."""
        problems = self.log.problems(final=final)
        assert not problems, (
            f"{label}: the browser reported {len(problems)} error(s) or warning(s):\n  "
            + "\n  ".join(problems)
            + f"\nall console messages:\n{self.log.console_text()}"
        )

    async def look(self, label: str, *, idle: bool = True) -> None:
        """Screenshot, CSP and axe check and HTML capture of the page as it is now (after the network is
        idle unless ``idle=False``: a test holding a request on purpose)."""
        if idle:
            await self.page.wait_for_load_state("networkidle")
        self.shots += 1
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^a-z0-9]+", "-", f"{self.name}-{self.shots:02d}-{label}".lower()).strip("-")
        await self.page.screenshot(path=str(SCREENSHOTS / f"{slug}.png"), full_page=True)
        self.pages_html.append(await self.page.content())
        violations = await self.page.evaluate("() => window.__cspViolations")
        assert violations == [], f"{label}: the page's CSP blocked {violations}"
        await self.page.evaluate(self.axe + "\n;true")
        result: dict[str, Any] = await self.page.evaluate(
            "async () => await axe.run(document, {resultTypes: ['violations']})"
        )
        blocking = [
            f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}"
            for v in result["violations"]
            if v.get("impact") in BLOCKING_IMPACTS
        ]
        assert not blocking, f"{label}: accessibility violations {blocking}"
        self.assert_quiet(label)

    async def at_the_login_page(self) -> Page:
        """`/sign-in`: the console sends the browser to the provider (ORY Hydra), which sends it to its login
        page, the console's dev login (`/oidc/login?login_challenge=...`)."""
        await self.open("/sign-in")
        assert self.page.url.startswith(self.base_url + "/oidc/login?login_challenge="), self.page.url
        return self.page

    async def sign_in(self, subject: str, *permissions: str) -> None:
        """Signs in through Hydra as a user does: the console's `/sign-in`, Hydra, the login page (a user id
        and permissions), Hydra, the consent (granted without a page), Hydra, the console's callback, `/`."""
        page = await self.at_the_login_page()
        await page.get_by_label("User id").fill(subject)
        await self.choose_and_sign_in(*permissions)
        self.subject = subject

    async def choose_and_sign_in(self, *permissions: str) -> None:
        for permission in permissions:
            await self.page.get_by_label(permission, exact=True).check()
        await self.look("sign-in")
        await self.page.get_by_role("button", name="Sign in").click()
        await self.page.wait_for_url(self.base_url + "/")


async def waterfall_screenshot(visitor: Visitor, trace_id: str, path: Path) -> Path:
    """A PNG of the trace's waterfall page as `visitor` sees it (its top: the facts and the picture, at the
    tab's width), written to `path`; the page is checked as every page is (`look`)."""
    await visitor.open(f"/traces/{trace_id}")
    await visitor.look(f"trace-{trace_id[:8]}")
    path.parent.mkdir(parents=True, exist_ok=True)
    await visitor.page.screenshot(path=str(path))
    return path


async def assert_nothing_secret_rendered(visitor: Visitor, secrets: set[str]) -> None:
    """No secret of the environment or of the test, and no bearer token at all, in any HTML it was sent."""
    bodies = await visitor.html()
    assert bodies, "no HTML recorded: the check would prove nothing"
    for body in bodies:
        for secret in secrets:
            assert secret not in body, f"a page shows a secret of {len(secret)} chars"
        assert JWT_PATTERN.search(body) is None, "a page shows a JWT"


@pytest.fixture
async def visitor_factory(
    chromium: Browser, axe_source: str, request: pytest.FixtureRequest
) -> AsyncIterator[Any]:
    """``make(base_url, name)``: a new signed-out tab. When the test ends, every tab must have reported no
    error or warning (what it did after its last `look()` included)."""
    contexts: list[BrowserContext] = []
    visitors: list[Visitor] = []

    async def make(base_url: str, name: str, *, width: int = 1280) -> Visitor:
        context = await chromium.new_context(viewport={"width": width, "height": 900}, accept_downloads=False)
        await context.add_init_script(CSP_LISTENER)
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = await context.new_page()
        visitor = await Visitor.create(page, base_url, f"{request.node.name[5:40]}-{name}", axe_source)
        visitors.append(visitor)
        return visitor

    yield make
    reported: list[str] = []
    try:
        for visitor in visitors:
            await visitor.page.wait_for_load_state("networkidle")  # what the last page still loads
            try:
                visitor.assert_quiet(f"at the end of the test, tab {visitor.name}", final=True)
            except AssertionError as failure:
                reported.append(str(failure))
    finally:
        for context in contexts:
            await context.close()
    assert not reported, "\n".join(reported)


def all_secrets(env: LocalEnvironment, witness: Witness) -> set[str]:
    """The environment's secrets (every secret file, the admin DSN's password) and the tests' own."""
    return secrets_of(env.root, env.stack) | {s for s in witness.secrets if len(s) >= 12}


@pytest.fixture
async def operator(env: LocalEnvironment, visitor_factory: Any, witness: Witness) -> AsyncIterator[Visitor]:
    """A user with every permission, signed in."""
    visitor: Visitor = await visitor_factory(env.url("console"), "operator")
    await visitor.sign_in(f"op-{uuid.uuid4().hex[:6]}", *OPERATOR_PERMISSIONS)
    yield visitor
    await assert_nothing_secret_rendered(visitor, all_secrets(env, witness))


@pytest.fixture
async def user(env: LocalEnvironment, visitor_factory: Any, witness: Witness) -> AsyncIterator[Visitor]:
    """A user without any operator permission, signed in."""
    visitor: Visitor = await visitor_factory(env.url("console"), "user")
    await visitor.sign_in(f"u-{uuid.uuid4().hex[:6]}")
    yield visitor
    await assert_nothing_secret_rendered(visitor, all_secrets(env, witness))
