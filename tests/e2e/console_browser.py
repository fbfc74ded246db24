"""The browser side of the console tests: Debian's Chromium driven by Playwright, one page per test.

Chromium is launched by its path (Playwright's own browser download cannot work here) with a fresh profile.
Every page a test visits is saved as a screenshot under `.local/console-screenshots/` and checked with
axe-core (injected from the console's node_modules): no serious or critical violation is allowed. The
HTML of every page is kept, so the test can prove no secret was ever rendered.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, async_playwright

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


@dataclass
class Visitor:
    """One browser tab of one signed-in user, recording what every page showed."""

    page: Page
    base_url: str
    name: str
    pages_html: list[str] = field(default_factory=list)
    shots: int = 0

    async def open(self, path: str) -> Page:
        response = await self.page.goto(self.base_url + path)
        assert response is not None and response.status < 400, f"{path}: {response and response.status}"
        return self.page

    async def look(self, label: str) -> None:
        """Screenshot, axe check and HTML capture of the page as it is now."""
        await self.page.wait_for_load_state("networkidle")
        self.shots += 1
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^a-z0-9]+", "-", f"{self.name}-{self.shots:02d}-{label}".lower()).strip("-")
        await self.page.screenshot(path=str(SCREENSHOTS / f"{slug}.png"), full_page=True)
        self.pages_html.append(await self.page.content())
        await self.page.add_script_tag(path=str(AXE))
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


@pytest.fixture
async def visitor_factory(chromium: Browser, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    contexts = []

    async def make(base_url: str, name: str, *, width: int = 1280) -> Visitor:
        context = await chromium.new_context(
            viewport={"width": width, "height": 900}, bypass_csp=True, accept_downloads=False
        )
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        return Visitor(await context.new_page(), base_url, f"{request.node.name[5:40]}-{name}")

    yield make
    for context in contexts:
        await context.close()
