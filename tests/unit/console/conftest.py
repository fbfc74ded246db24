"""The console app in process, over httpx's ASGI transport, with real settings files and no upstream: every
service URL points at a closed loopback port, so a request that reached an API would answer 502
``service_unavailable``, never the answers these tests expect."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from console.entrypoints.web import build_console, install
from console.settings import JWT_SERVICES, ConsoleSettings
from tests.conftest import free_port, private_file
from yovision_platform.settings import load_settings
from yovision_platform.web import create_app

SERVICE_URL_SETTINGS = ("SENSE_URL", "ORPHAN_URL", "BELL_URL", "SIGNAL_URL", "MEDIA_URL")
PROD_ISSUER = "https://sso.example.com"


def _key(path: Path) -> str:
    return str(private_file(path, secrets.token_hex(32)))


@pytest.fixture
def console_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment of a local-stack console (dev sign-in), as devsecrets writes it."""
    for name in list(os.environ):
        if name.startswith("CONSOLE_"):
            monkeypatch.delenv(name)
    closed = f"http://127.0.0.1:{free_port()}"
    values = {
        "CONSOLE_SESSION_KEY_FILE": _key(tmp_path / "session.key"),
        "CONSOLE_SENSE_API_TOKEN_FILE": str(
            private_file(tmp_path / "sense.token", secrets.token_urlsafe(32))
        ),
        "CONSOLE_DEV_SIGN_IN": "true",
        "CONSOLE_DEV_JWT_KEY_FILES": json.dumps({s: _key(tmp_path / f"{s}.key") for s in JWT_SERVICES}),
        **{f"CONSOLE_{name}": closed for name in SERVICE_URL_SETTINGS},
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def production_env(console_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The console behind an OIDC proxy: forwarded bearer tokens, no dev sign-in. Returns the key file."""
    for name in ("CONSOLE_DEV_SIGN_IN", "CONSOLE_DEV_JWT_KEY_FILES"):
        monkeypatch.delenv(name)
    key_file = Path(_key(tmp_path / "console-jwt.key"))
    monkeypatch.setenv("CONSOLE_AUTH_JWT_KEY_FILE", str(key_file))
    monkeypatch.setenv("CONSOLE_AUTH_JWT_ISSUER", PROD_ISSUER)
    return key_file


def console_app() -> FastAPI:
    settings = load_settings(ConsoleSettings)
    app = create_app("console", "0")
    install(app, build_console(settings))
    return app


ClientFactory = Callable[..., httpx.AsyncClient]


@pytest.fixture
async def client_for() -> AsyncIterator[ClientFactory]:
    """``client_for(host="127.0.0.1", scheme="http")``: a client of a fresh console app (settings read now),
    reached as ``host`` (the Host header decides the dev cookie's Secure flag). A client keeps a Secure
    cookie only over https, as a browser does: production tests (always Secure) use ``scheme="https"``."""
    clients: list[httpx.AsyncClient] = []

    def make(host: str = "127.0.0.1", scheme: str = "http") -> httpx.AsyncClient:
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=console_app()),
            base_url=f"{scheme}://{host}",
            follow_redirects=False,
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


async def signed_in(client: httpx.AsyncClient, subject: str = "alice", *permissions: str) -> str:
    """Dev sign-in through the real form; returns the signed-in session's CSRF token."""
    csrf = await csrf_of(client, "/sign-in")
    answer = await client.post(
        "/sign-in", data={"csrf": csrf, "subject": subject, "permission": list(permissions)}
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/", answer.text
    return await csrf_of(client, "/sign-in")  # the page renders without any API call


async def csrf_of(client: httpx.AsyncClient, path: str) -> str:
    page = await client.get(path)
    assert page.status_code == 200, page.text
    marker = 'data-csrf="'
    start = page.text.index(marker) + len(marker)
    return page.text[start : page.text.index('"', start)]
