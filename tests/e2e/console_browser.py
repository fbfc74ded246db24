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
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, Response, async_playwright
from playwright.async_api import Error as PlaywrightError

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
    pages_html: list[str] = field(default_factory=list)
    shots: int = 0
    lost: int = 0
    _reads: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.page.on("response", self._on_response)

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

    async def open(self, path: str) -> Page:
        response = await self.page.goto(self.base_url + path)
        assert response is not None and response.status < 400, f"{path}: {response and response.status}"
        return self.page

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

    async def sign_in(self, subject: str, *permissions: str) -> None:
        await self.open("/sign-in")
        await self.page.get_by_label("User id").fill(subject)
        for permission in permissions:
            await self.page.get_by_label(permission, exact=True).check()
        await self.look("sign-in")
        await self.page.get_by_role("button", name="Sign in").click()
        await self.page.wait_for_url(self.base_url + "/")


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
    contexts = []

    async def make(base_url: str, name: str, *, width: int = 1280) -> Visitor:
        context = await chromium.new_context(viewport={"width": width, "height": 900}, accept_downloads=False)
        await context.add_init_script(CSP_LISTENER)
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        return Visitor(await context.new_page(), base_url, f"{request.node.name[5:40]}-{name}", axe_source)

    yield make
    for context in contexts:
        await context.close()
