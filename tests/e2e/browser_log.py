"""What a browser tab reported while a test drove it, and which of it is a problem.

`PageLog` listens to one Playwright page from its creation and keeps, in arrival order: every console
message, every uncaught page error (`pageerror`), every failed request (`requestfailed`), every HTTP answer
>= 400, and every `pattern` attribute the page could not compile under the `v` flag (`PATTERN_CHECK` runs
in the page on each document and after each htmx swap). `problems()` is what a test must find empty, each
entry naming the page it happened on:

- a console message of type error, warning or assert (Chromium logs there a 404 of a subresource, the
  icon's included, which Playwright's request events leave out, a CSP refusal, an invalid `pattern`);
- any page error, any `pattern` the browser cannot compile;
- any answer >= 400 to a subresource or an htmx/fetch call, and any main document >= 400;
- any failed request, except two kinds of `net::ERR_ABORTED` that are the browser's own doing, not a
  failure: a request of a document the tab left (sent before a main-frame navigation committed, failed
  after that navigation started: a poll, an image or the icon cut off by a link, a form or a reload), and
  a media element's load (Chromium's media loader cancels its requests as it buffers and seeks).

A test that provokes an error on purpose says so, narrowly: `expect_document(status)` (a main document
answering exactly that status inside the block, and Chromium's "Failed to load resource" line for that
very document), or `expect_abort(url_suffix)` (a request sent inside the block that the test cancels).
Anything else still counts, and an expectation that never came true by the end of the test is a problem
too, so an expectation cannot outlive the flow it was written for.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import ConsoleMessage, Frame, Page, Request, Response
from playwright.async_api import Error as PlaywrightError

FAILING_CONSOLE_TYPES = frozenset({"error", "warning", "assert"})
ABORTED = "net::ERR_ABORTED"
LOAD_FAILED = "Failed to load resource: the server responded with a status of {status} "
REPORT_BINDING = "__reportInvalidPattern"
OPEN_END = 1 << 62
# An init script (the test driver's, outside the page's CSP), run in every document before its own scripts.
# A browser compiles a `pattern` attribute as `^(?:value)$` with the `v` flag and, when that fails, only
# logs it (once a value is typed) and drops the field's check: here every one is reported, by its field.
PATTERN_CHECK = f"""
(() => {{
  const checked = new WeakSet();
  const check = () => {{
    for (const field of document.querySelectorAll("[pattern]")) {{
      if (checked.has(field)) continue;
      checked.add(field);
      const value = field.getAttribute("pattern");
      try {{ new RegExp(`^(?:${{value}})$`, "v"); }} catch (error) {{
        window.{REPORT_BINDING}(`field ${{field.id || field.name}}: ${{value}}: ${{error.message}}`);
      }}
    }}
  }};
  document.addEventListener("DOMContentLoaded", check);
  document.addEventListener("htmx:afterSettle", check);
}})();
"""


@dataclass(frozen=True)
class Entry:
    seq: int
    page: str  # the path of the tab's document when it arrived
    kind: str  # console.<type>, pageerror, invalid pattern, requestfailed, subresource, document
    detail: str
    url: str = ""
    status: int = 0
    sent: int = -1  # a request's: when it was sent (the same clock as seq)
    resource: str = ""  # a request's resource type (document, script, xhr, fetch, media, other...)


@dataclass
class Expected:
    what: str
    kind: str
    match: Callable[[Entry], bool]
    first: int
    last: int = OPEN_END  # set when the block ends

    def covers(self, entry: Entry) -> bool:
        moment = entry.sent if entry.kind == "requestfailed" else entry.seq
        return entry.kind == self.kind and self.first < moment < self.last and self.match(entry)


@dataclass
class PageLog:
    page: Page
    entries: list[Entry] = field(default_factory=list)
    expected: list[Expected] = field(default_factory=list)
    _clock: itertools.count[int] = field(default_factory=itertools.count)
    _sent: dict[Request, int] = field(default_factory=dict)
    _navigations: list[int] = field(default_factory=list)  # main-frame navigation requests sent
    _commits: list[int] = field(default_factory=list)  # main-frame documents committed

    def __post_init__(self) -> None:
        self.page.on("console", self._on_console)
        self.page.on("pageerror", self._on_page_error)
        self.page.on("request", self._on_request)
        self.page.on("requestfailed", self._on_request_failed)
        self.page.on("response", self._on_response)
        self.page.on("framenavigated", self._on_frame_navigated)

    async def install(self) -> None:
        """The in-page `pattern` check; before the page's first navigation."""
        await self.page.expose_binding(REPORT_BINDING, self._on_invalid_pattern)
        await self.page.add_init_script(PATTERN_CHECK)

    # --- recording ----------------------------------------------------------------------------------------

    def _add(self, kind: str, detail: str, **request: Any) -> None:
        page = urlsplit(self.page.url).path or self.page.url
        self.entries.append(Entry(next(self._clock), page, kind, detail, **request))

    def _is_document(self, request: Request) -> bool:
        try:
            main = request.frame == self.page.main_frame
        except PlaywrightError:  # a request of no frame (a service worker's): not a document
            return False
        return main and request.is_navigation_request()

    def _on_console(self, message: ConsoleMessage) -> None:
        self._add(f"console.{message.type}", message.text, url=message.location.get("url", ""))

    def _on_page_error(self, error: PlaywrightError) -> None:
        self._add("pageerror", f"{error.name}: {error.message}")

    def _on_invalid_pattern(self, source: Any, text: str) -> None:
        self._add("invalid pattern", text)

    def _on_frame_navigated(self, frame: Frame) -> None:
        if frame == self.page.main_frame:
            self._commits.append(next(self._clock))

    def _on_request(self, request: Request) -> None:
        self._sent[request] = sent = next(self._clock)
        if self._is_document(request):
            self._navigations.append(sent)

    def _on_request_failed(self, request: Request) -> None:
        failure = request.failure or "unknown failure"
        self._add(
            "requestfailed",
            f"{request.method} {request.url}: {failure}",
            url=request.url,
            sent=self._sent.get(request, -1),
            resource=request.resource_type,
        )

    def _on_response(self, response: Response) -> None:
        if response.status >= 400:
            request = response.request
            kind = "document" if self._is_document(request) else "subresource"
            detail = f"HTTP {response.status} for {request.method} {response.url}"
            sent = self._sent.get(request, -1)
            self._add(kind, detail, url=response.url, status=response.status, sent=sent)

    # --- expectations -------------------------------------------------------------------------------------

    @asynccontextmanager
    async def _expecting(self, what: str, kind: str, match: Callable[[Entry], bool]) -> AsyncIterator[None]:
        expected = Expected(what, kind, match, next(self._clock))
        self.expected.append(expected)
        try:
            yield
        finally:
            expected.last = next(self._clock)

    def expect_document(self, status: int) -> AbstractAsyncContextManager[None]:
        """``async with``: a main document answering `status` inside the block is what the test provokes."""
        return self._expecting(f"a document answering {status}", "document", lambda e: e.status == status)

    def expect_abort(self, url_suffix: str) -> AbstractAsyncContextManager[None]:
        """``async with``: a request to a URL ending in `url_suffix`, sent inside the block, is cancelled on
        purpose (``net::ERR_ABORTED``, possibly after the block)."""
        return self._expecting(
            f"an aborted request to ...{url_suffix}",
            "requestfailed",
            lambda e: e.url.endswith(url_suffix) and e.detail.endswith(ABORTED),
        )

    # --- verdict ------------------------------------------------------------------------------------------

    def problems(self, *, final: bool = False) -> list[str]:
        """Every error or warning no expectation covers; when `final` (the test is over), then every
        expectation that never came true."""
        met: set[int] = set()
        documents: dict[str, int] = {}  # the expected error documents: url -> status
        found: list[str] = []
        for entry in self.entries:
            covering = [i for i, x in enumerate(self.expected) if x.covers(entry)]
            if covering:
                met.add(covering[0])
                if entry.kind == "document":
                    documents[entry.url] = entry.status
            elif not self._harmless(entry, documents):
                where = f" ({entry.url})" if entry.kind.startswith("console.") and entry.url else ""
                found.append(f"{entry.kind} on {entry.page}: {entry.detail}{where}")
        unmet = [f"expected {x.what}: never happened" for i, x in enumerate(self.expected) if i not in met]
        return found + (unmet if final else [])

    def _harmless(self, entry: Entry, documents: dict[str, int]) -> bool:
        if entry.kind == "requestfailed":
            return entry.detail.endswith(ABORTED) and (entry.resource == "media" or self._left_behind(entry))
        if not entry.kind.startswith("console."):
            return False
        if entry.kind[len("console.") :] not in FAILING_CONSOLE_TYPES:
            return True
        status = documents.get(entry.url)  # Chromium's line for an error document the test provoked
        return status is not None and entry.detail.startswith(LOAD_FAILED.format(status=status))

    def _left_behind(self, entry: Entry) -> bool:
        """Whether a navigation that started before the failure committed its document after the request
        was sent: the request was the old document's, cut off as the tab left it. (Chromium may report the
        failure before or after the commit, and send an old document's request after the navigation's.)"""
        for started in self._navigations:
            if started >= entry.seq:
                return False
            after = bisect.bisect_right(self._commits, started)
            if after < len(self._commits) and self._commits[after] > entry.sent:
                return True
        return False

    def console_text(self) -> str:
        """Every console message, as received (for a failure's text)."""
        lines = [f"  {e.kind} on {e.page}: {e.detail}" for e in self.entries if e.kind.startswith("console.")]
        return "\n".join(lines) or "  (none)"
