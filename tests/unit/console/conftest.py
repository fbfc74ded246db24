"""The console app in process, over httpx's ASGI transport, with real settings files. Its OpenID provider is
`FakeProvider` (shaped as ORY Hydra) on a loopback port, reached over real HTTP by the console and by the
test's "browser" (the same httpx client: one cookie jar, as a browser has). Every service URL points at a
closed loopback port, so a request that reached an API would answer 502 ``service_unavailable``, never the
answers these tests expect."""

from __future__ import annotations

import dataclasses
import os
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from fastapi import FastAPI

from console.entrypoints.dependencies import Console
from console.entrypoints.main import build_console
from console.entrypoints.web import install
from console.settings import ConsoleSettings
from tests.support.served_app import serve_app
from tests.support.stack import free_port, private_file
from tests.unit.console.provider import CLIENT_ID, FakeProvider
from yovision_platform.settings import load_settings
from yovision_platform.web import create_app

SERVICE_URL_SETTINGS = ("SENSE_URL", "ORPHAN_URL", "BELL_URL", "SIGNAL_URL", "MEDIA_URL")
REDIRECTS_MAX = 20


def _key(path: Path) -> str:
    return str(private_file(path, secrets.token_hex(32)))


@pytest.fixture
def console_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment of a local-stack console (dev login), as devsecrets writes it; the provider's URLs
    point at a closed port until the `provider` fixture serves one there."""
    for name in list(os.environ):
        if name.startswith("CONSOLE_"):
            monkeypatch.delenv(name)
    closed = f"http://127.0.0.1:{free_port()}"
    values = {
        "CONSOLE_SESSION_KEY_FILE": _key(tmp_path / "session.key"),
        "CONSOLE_OIDC_ISSUER": closed,
        "CONSOLE_OIDC_CLIENT_ID": CLIENT_ID,
        "CONSOLE_OIDC_CLIENT_SECRET_FILE": str(
            private_file(tmp_path / "client.secret", secrets.token_urlsafe(32))
        ),
        "CONSOLE_DEV_LOGIN_ADMIN_URL": closed,
        **{f"CONSOLE_{name}": closed for name in SERVICE_URL_SETTINGS},
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def production_env(console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The console as deployed: an https issuer, no dev login (the provider's own login pages)."""
    monkeypatch.delenv("CONSOLE_DEV_LOGIN_ADMIN_URL")
    monkeypatch.setenv("CONSOLE_OIDC_ISSUER", "https://sso.example.com")
    return {k: v for k, v in os.environ.items() if k.startswith("CONSOLE_")}


@pytest.fixture
def client_secret(console_env: dict[str, str]) -> str:
    return Path(console_env["CONSOLE_OIDC_CLIENT_SECRET_FILE"]).read_text(encoding="utf-8")


@pytest.fixture
async def provider(client_secret: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeProvider]:
    """The fake provider on loopback, the console's settings pointing at it (issuer and admin API)."""
    fake = FakeProvider(client_secret=client_secret)
    async with serve_app(fake.app()) as port:
        fake.issuer = f"http://127.0.0.1:{port}"
        monkeypatch.setenv("CONSOLE_OIDC_ISSUER", fake.issuer)
        monkeypatch.setenv("CONSOLE_DEV_LOGIN_ADMIN_URL", fake.issuer)
        yield fake


def console_app() -> FastAPI:
    settings = load_settings(ConsoleSettings)
    app = create_app("console", "0")
    install(app, build_console(settings))
    return app


def with_fakes(client: ConsoleClient, **ports: Any) -> None:
    """The console of `client` calling the given fakes (`console.adapters.memory`) instead of the services,
    e.g. ``with_fakes(client, sense=MemorySenseReconciler())``: the page tests that need no HTTP detail."""
    client.console.use_cases = dataclasses.replace(client.console.use_cases, **ports)


class ConsoleClient(httpx.AsyncClient):
    """A browser of one console app; `console` is that app's (its sign-ins' clock, its metrics)."""

    def __init__(self, app: FastAPI, provider: FakeProvider, base_url: str) -> None:
        super().__init__(
            transport=httpx.ASGITransport(app=app),
            mounts={provider.issuer: httpx.AsyncHTTPTransport()},
            base_url=base_url,
            follow_redirects=False,
        )
        self.console: Console = app.state.console


ClientFactory = Callable[..., ConsoleClient]


@pytest.fixture
async def client_for(provider: FakeProvider) -> AsyncIterator[ClientFactory]:
    """``client_for(host="127.0.0.1", scheme="http")``: a "browser" of a fresh console app (settings read
    now), reached as ``host`` (the Host header decides the dev cookie's Secure flag); requests to the
    provider go to it over HTTP, with the same cookie jar. A client keeps a Secure cookie only over https,
    as a browser does."""
    clients: list[ConsoleClient] = []

    def make(host: str = "127.0.0.1", scheme: str = "http") -> ConsoleClient:
        provider.console_origins.add(f"{scheme}://{host}")
        client = ConsoleClient(console_app(), provider, f"{scheme}://{host}")
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()
        await client.console.aclose()


async def follow(client: httpx.AsyncClient, answer: httpx.Response) -> httpx.Response:
    """Follows redirects as a browser does (303 turns a POST into a GET), across the console and the
    provider, until an answer that is no redirect."""
    for _ in range(REDIRECTS_MAX):
        if answer.status_code not in (301, 302, 303, 307, 308):
            return answer
        answer = await client.get(urljoin(str(answer.url), answer.headers["location"]))
    raise AssertionError("too many redirects")


async def login_page(client: httpx.AsyncClient) -> httpx.Response:
    """`/sign-in`, followed to the provider's login page (the console's dev login)."""
    page = await follow(client, await client.get("/sign-in"))
    assert page.status_code == 200 and urlsplit(str(page.url)).path == "/oidc/login", page.url
    return page


async def signed_in(client: httpx.AsyncClient, subject: str = "alice", *permissions: str) -> str:
    """Signs in through the provider as a browser does (the login page: a user id and permissions; the
    consent; the callback); returns the signed-in session's CSRF token."""
    csrf = csrf_in((await login_page(client)).text)
    answer = await client.post(
        "/oidc/login", data={"csrf": csrf, "subject": subject, "permission": list(permissions)}
    )
    assert answer.status_code == 303, answer.text
    landed = await follow(client, answer)
    assert urlsplit(str(landed.url)).path == "/", landed.url
    return await csrf_of(client, "/watchers/new")  # the page renders without any API call


def csrf_in(html: str) -> str:
    marker = 'data-csrf="'
    start = html.index(marker) + len(marker)
    return html[start : html.index('"', start)]


async def csrf_of(client: httpx.AsyncClient, path: str) -> str:
    page = await client.get(path)
    assert page.status_code == 200, page.text
    return csrf_in(page.text)
