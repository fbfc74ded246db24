"""Signing in to the console as a browser does, without a browser (the benchmarks' part): `/sign-in`, ORY
Hydra, the console's dev login page (its form: a user id and permissions), Hydra, the consent, Hydra, the
console's callback. One httpx client is one browser: it keeps both servers' cookies."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

__all__ = ["sign_in"]

CSRF_MARKER = 'data-csrf="'
REDIRECTS_MAX = 12


def _csrf(html: str) -> str:
    start = html.index(CSRF_MARKER) + len(CSRF_MARKER)
    return html[start : html.index('"', start)]


async def _follow(browser: httpx.AsyncClient, answer: httpx.Response, until: str) -> httpx.Response:
    """Follows redirects (303 turns a POST into a GET) until one leads to `until` (a path of the console),
    which is returned unfollowed; RuntimeError on any other answer."""
    for _ in range(REDIRECTS_MAX):
        if answer.status_code not in (302, 303):
            raise RuntimeError(f"sign-in: {answer.request.url.path} answered {answer.status_code}")
        target = answer.request.url.join(answer.headers["location"])
        if target.path == until:
            return answer
        answer = await browser.get(target)
    raise RuntimeError("sign-in: too many redirects")


async def sign_in(
    console_url: str, browser: httpx.AsyncClient, subject: str, permissions: Sequence[str]
) -> None:
    """Signs `browser` in to the console at `console_url` as `subject` with `permissions` (and stops at the
    callback's redirect to `/`: the overview is no part of signing in)."""
    at_login = await _follow(browser, await browser.get(f"{console_url}/sign-in"), "/oidc/login")
    page = await browser.get(at_login.request.url.join(at_login.headers["location"]))
    if page.status_code != 200:
        raise RuntimeError(f"sign-in: the login page answered {page.status_code}")
    accepted = await browser.post(
        f"{console_url}/oidc/login",
        data={"csrf": _csrf(page.text), "subject": subject, "permission": list(permissions)},
    )
    at_callback = await _follow(browser, accepted, "/oidc/callback")
    done = await browser.get(at_callback.request.url.join(at_callback.headers["location"]))
    if done.status_code != 303 or done.headers.get("location") != "/":
        raise RuntimeError(f"sign-in: the callback answered {done.status_code}")
