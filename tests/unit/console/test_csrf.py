"""CSRF on every state-changing route of the console, found from the app itself (a new route is covered
without editing this test): no token, a wrong token (form field or header) or another session's token is
``403 csrf_failed`` before the route runs; with the session's own token the same request reaches the route
(here it then meets the closed upstream). That nothing happens upstream on a refusal is proven against the
real services in tests/e2e/test_console_csrf.py."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Sequence

import httpx
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from console.domain.identity import PERMISSIONS
from console.entrypoints.web import STATE_CHANGING
from tests.unit.console.conftest import ClientFactory, console_app, login_page, signed_in
from tests.unit.console.provider import FakeProvider

PARAMETER_VALUES = {"notification_id": "7", "index": "0"}


def _state_changing_routes() -> list[tuple[str, str]]:
    """Every (method, path) of the app that changes state; sign-out last (it ends the session)."""
    routes = [
        (method, route.path)
        for route in _api_routes(console_app().routes)
        for method in sorted(route.methods & STATE_CHANGING)
    ]
    return sorted(routes, key=lambda r: r[1] == "/sign-out")


def _api_routes(routes: Sequence[BaseRoute]) -> Iterator[APIRoute]:
    """The app's routes, included routers' too (FastAPI keeps those as `_IncludedRouter`; the console
    includes its page routers without a prefix)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif (included := getattr(route, "original_router", None)) is not None:
            yield from _api_routes(included.routes)


def _concrete(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: PARAMETER_VALUES.get(m.group(1), str(uuid.uuid4())), path)


def _is_refusal(answer: httpx.Response) -> bool:
    return answer.status_code == 403 and "csrf_failed" in answer.text


async def _send(
    client: httpx.AsyncClient, method: str, path: str, *, field: str | None, header: str | None
) -> httpx.Response:
    headers = {"X-CSRF-Token": header} if header is not None else {}
    if path.startswith("/media/uploads"):  # the upload proxy takes JSON or raw chunks, never a form
        return await client.request(
            method, path, content=b"{}", headers={**headers, "Content-Type": "application/json"}
        )
    data = {"csrf": field} if field is not None else {}
    data |= {"desired_state": "disabled", "device_id": str(uuid.uuid4()), "read": "true", "status": "PAUSED"}
    return await client.request(method, path, data=data, headers=headers)


async def test_every_form_is_refused_without_the_sessions_token(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    routes = _state_changing_routes()
    assert {("POST", "/oidc/login"), ("POST", "/sign-out"), ("POST", "/devices/batch"),
            ("POST", "/inbox/{notification_id}"),
            ("POST", "/watchers/{watcher_id}/status"), ("PUT", "/media/uploads/{session_id}/chunks/{index}"),
            ("POST", "/sites"), ("POST", "/media/{material_id}/retry")} <= set(routes)  # fmt: skip
    other_token = await signed_in(client_for(), "mallory", *PERMISSIONS)
    client = client_for()
    token = await signed_in(client, "alice", *PERMISSIONS)
    for method, path in routes:
        target = _concrete(path)
        refused = [
            await _send(client, method, target, field=None, header=None),
            await _send(client, method, target, field="", header=None),
            await _send(client, method, target, field="x" * len(token), header=None),
            await _send(client, method, target, field=None, header="x" * len(token)),
            await _send(client, method, target, field=other_token, header=None),
            await _send(client, method, target, field=token[:-1], header=None),
        ]
        for answer in refused:
            assert _is_refusal(answer), (method, target, answer.status_code)
        accepted = await _send(client, method, target, field=token, header=token)
        assert not _is_refusal(accepted), (method, target)


async def test_a_refused_login_form_signs_nobody_in(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    client = client_for()
    await login_page(client)
    answer = await client.post("/oidc/login", data={"subject": "mallory", "permission": list(PERMISSIONS)})
    assert _is_refusal(answer)
    assert [flow.login_verifier for flow in provider.flows] == [None]  # the provider was not told
    assert (await client.get("/watchers/new")).status_code == 303


async def test_a_refused_sign_out_keeps_the_session(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    client = client_for()
    await signed_in(client, "alice")
    assert _is_refusal(await client.post("/sign-out", data={"csrf": "forged"}))
    assert (await client.get("/watchers/new")).status_code == 200
    assert provider.revocations == [] and provider.sessions
