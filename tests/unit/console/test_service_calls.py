"""Every service call carries the signed-in user's own access token, the one the provider issued at sign-in
(or at the last refresh) for the five audiences: Sense as every other service. No `X-Actor`, no token of the
console's own. The services are small fakes on loopback that record what the console sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import jwt
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse

from tests.support.served_app import serve_app
from tests.unit.console.conftest import ClientFactory, signed_in
from tests.unit.console.provider import FakeProvider
from tests.unit.console.test_token_refresh import _due
from yovision_platform.web import AUDIENCES


@dataclass
class Recorder:
    seen: list[dict[str, str]] = field(default_factory=list)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
        async def anything(request: Request, path: str) -> Any:
            self.seen.append({"path": f"/{path}", **{k.lower(): v for k, v in request.headers.items()}})
            if path == "metrics":
                return PlainTextResponse("")
            if path == "v1/devices":
                return {"items": [], "next_after": None}
            if path == "v1/notifications":
                return {"items": [], "next_cursor": None}
            return {}

        return app


@pytest.fixture
async def services(console_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Recorder]:
    recorder = Recorder()
    async with serve_app(recorder.app()) as port:
        for setting in ("SENSE_URL", "BELL_URL"):
            monkeypatch.setenv(f"CONSOLE_{setting}", f"http://127.0.0.1:{port}")
        yield recorder


async def test_sense_and_bell_get_the_users_own_token_and_no_actor_header(
    services: Recorder, client_for: ClientFactory, provider: FakeProvider
) -> None:
    client = client_for()
    await signed_in(client, "alice", "sense:operate")
    services.seen.clear()
    assert (await client.get("/devices")).status_code == 200
    assert (await client.get("/inbox")).status_code == 200
    calls = [c for c in services.seen if c["path"] in ("/v1/devices", "/v1/notifications")]
    assert len(calls) == 2
    for call in calls:
        assert "x-actor" not in call
        scheme, _, token = call["authorization"].partition(" ")
        claims = jwt.decode(token, options={"verify_signature": False})
        assert scheme == "Bearer" and claims["sub"] == "alice" and claims["aud"] == list(AUDIENCES)
        assert claims["iss"] == provider.issuer and "sense:operate" in claims["scp"]
    assert calls[0]["authorization"] == calls[1]["authorization"]  # one token for every service


async def test_after_a_refresh_the_services_get_the_new_token(
    services: Recorder, client_for: ClientFactory, provider: FakeProvider
) -> None:
    client = client_for()
    await signed_in(client, "alice", "sense:operate")
    await client.get("/devices")
    first = services.seen[-1]["authorization"]
    _due(client)
    await client.get("/devices")
    assert provider.refreshes() == 1
    assert services.seen[-1]["authorization"] != first
