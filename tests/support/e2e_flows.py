"""Steps of the end-to-end flows that the services' failover on a cluster (tests/cluster) takes too: a
price target and watcher (tests/e2e/test_watchers.py), the console's sign-in through Hydra
(tests/e2e/test_console_csrf.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, NamedTuple

import asyncpg
import httpx
import pytest

from tests.support.e2e_fixtures import Witness, client, user_token
from yovision_platform.tools.environment import LocalEnvironment

OPERATOR_PERMISSIONS = ("sense:operate", "orphan:read", "bell:audit-read", "signal:read", "media:drain")


class Target:
    """A tiny HTTP server on 127.0.0.1 whose answer the test sets: JSON `{"data": {"price": N}}` or text."""

    def __init__(self) -> None:
        self.body = b""
        self.requests = 0
        self._server: asyncio.Server | None = None

    def answer_price(self, price: int) -> None:
        self.body = json.dumps({"data": {"price": price}}).encode()

    def answer_text(self, text: str) -> None:
        self.body = text.encode()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            self.requests += 1
            head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(self.body)}\r\nConnection: close\r\n\r\n"
            writer.write(head.encode() + self.body)
            await writer.drain()
        writer.close()

    async def __aenter__(self) -> Target:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/price"


def price_watcher(name: str, agent_id: str, url: str) -> dict[str, Any]:
    """A watcher definition that checks `data.price` of `url` hourly and triggers `agent_id` on a change."""
    return {
        "name": name,
        "agent_id": agent_id,
        "url": url,
        "method": "GET",
        "headers": [],
        "interval_minutes": 60,
        "compare_mode": "JSON_FIELD",
        "json_path": "data.price",
        "prompt_template": "{name}: {diff}",
    }


def csrf_of(html: str) -> str:
    start = html.index('data-csrf="') + len('data-csrf="')
    return html[start : html.index('"', start)]


async def signed_in_through_hydra(http: httpx.AsyncClient, subject: str) -> None:
    """As a browser signs in: `/sign-in`, Hydra, the login page (its form), Hydra, the consent, Hydra, the
    callback, `/` (the client follows the redirects and keeps both servers' cookies)."""
    login = await http.get("/sign-in", follow_redirects=True)
    assert login.status_code == 200 and login.url.path == "/oidc/login", login.url
    signed = await http.post(
        "/oidc/login",
        data={"csrf": csrf_of(login.text), "subject": subject, "permission": list(OPERATOR_PERMISSIONS)},
        follow_redirects=True,
    )
    assert signed.status_code == 200 and signed.url.path == "/", signed.url


async def user_client(
    env: LocalEnvironment, witness: Witness, service: str, subject: str, *permissions: str
) -> httpx.AsyncClient:
    """A client of `service` with `subject`'s access token (which the witness then looks for as a secret)."""
    token = await user_token(env, service, subject, *permissions)
    witness.secrets.add(token)
    return client(env.url(service), witness, {"Authorization": f"Bearer {token}"})


class SenseFlow(NamedTuple):
    """What a flow through Sense takes: the environment, clients of Sense and of its MediaMTX, the witness of
    every response, an admin connection to the environment's database."""

    env: LocalEnvironment
    sense: httpx.AsyncClient
    mediamtx: httpx.AsyncClient
    witness: Witness
    admin_db: asyncpg.Connection


@pytest.fixture
def sense_flow(
    env: LocalEnvironment,
    sense: httpx.AsyncClient,
    mediamtx: httpx.AsyncClient,
    witness: Witness,
    admin_db: asyncpg.Connection,
) -> SenseFlow:
    return SenseFlow(env, sense, mediamtx, witness, admin_db)
