"""CSRF against the real services: each console form sent without the session's token (and with a wrong
one) is `403 csrf_failed`, and the state it would have changed -- read back from the owning service -- is
exactly as before. The same request with the token then does change it, so each refusal was of a request
that would otherwise have worked. (Every state-changing route's refusal, found from the app itself, is in
tests/unit/console/test_csrf.py.)"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.support.e2e_fixtures import CHUNK_BYTES, Witness, client, device_body, eventually, user_token
from tests.support.e2e_flows import Target, signed_in_through_hydra, user_client
from tests.support.e2e_flows import csrf_of as _csrf
from yovision_platform.tools.environment import LocalEnvironment

WRONG_TOKEN = "x" * 43
FIRST_CHUNK = b"0123456789" * (CHUNK_BYTES // 10) + b"0" * (CHUNK_BYTES % 10)


@dataclass
class Browserless:
    """The console as a browser session sees it: a cookie jar and the session's CSRF token."""

    http: httpx.AsyncClient
    csrf: str
    subject: str

    async def post(self, path: str, data: dict[str, Any], *, token: str | None) -> httpx.Response:
        return await self.http.post(path, data={**data, **({"csrf": token} if token is not None else {})})


@pytest.fixture
async def session(env: LocalEnvironment, witness: Witness) -> AsyncIterator[Browserless]:
    subject = f"csrf-{uuid.uuid4().hex[:6]}"
    async with client(env.url("console"), witness) as http:
        await signed_in_through_hydra(http, subject)
        yield Browserless(http, _csrf((await http.get("/watchers/new")).text), subject)


async def refused_then_accepted(
    session: Browserless,
    path: str,
    data: dict[str, Any],
    state: Callable[[], Awaitable[Any]],
    *,
    accepted: int = 303,
) -> tuple[Any, Any]:
    """Post without a token and with a wrong one (403 each, `state()` unchanged), then with the session's
    token (answered `accepted`). Returns the state before and after the accepted post."""
    before = await state()
    for token in (None, WRONG_TOKEN, ""):
        answer = await session.post(path, data, token=token)
        assert (answer.status_code, "csrf_failed" in answer.text) == (403, True), (path, token)
        assert await state() == before, f"{path} changed state although refused"
    answer = await session.post(path, data, token=session.csrf)
    assert answer.status_code == accepted, (path, answer.status_code)
    return before, await state()


async def test_refused_device_forms_change_nothing_in_sense(
    env: LocalEnvironment, session: Browserless, sense: httpx.AsyncClient
) -> None:
    tenant = f"t-csrf-{uuid.uuid4().hex[:6]}"
    created = await sense.post(
        "/v1/devices",
        json=device_body(tenant, "s1", f"csrf-{uuid.uuid4().hex[:8]}", "rtsp://10.5.0.1/s", "disabled"),
    )
    device = created.json()["id"]

    async def device_state() -> tuple[str, str, int]:
        found = (await sense.get(f"/v1/devices/{device}")).json()
        return found["desired_state"], found["name"], found["config_version"]

    async def tenant_devices() -> list[str]:
        return [
            d["id"] for d in (await sense.get("/v1/devices", params={"tenant_id": tenant})).json()["items"]
        ]

    async def site_limit() -> int:
        return int((await sense.get(f"/v1/sites/{tenant}/s1")).json()["max_video_channels"])

    before, after = await refused_then_accepted(
        session, f"/devices/{device}/desired-state", {"desired_state": "enabled"}, device_state
    )
    assert (before[0], after[0]) == ("disabled", "enabled")
    before, after = await refused_then_accepted(
        session, "/devices/batch", {"desired_state": "disabled", "device_id": device, "back": "/devices"},
        device_state,
    )  # fmt: skip
    assert (before[0], after[0]) == ("enabled", "disabled")
    before, after = await refused_then_accepted(
        session, f"/devices/{device}", {"name": "renamed"}, device_state
    )
    assert (before[1], after[1]) == (before[1], "renamed")
    new_device = {"tenant_id": tenant, "site_id": "s1", "name": "n",
                  "path_name": f"csrf-{uuid.uuid4().hex[:8]}", "source_uri": "rtsp://10.5.0.2/s"}  # fmt: skip
    before, after = await refused_then_accepted(session, "/devices", new_device, tenant_devices)
    assert len(after) == len(before) + 1
    before, after = await refused_then_accepted(
        session, "/sites", {"tenant_id": tenant, "site_id": "s1", "max_video_channels": "9"}, site_limit
    )
    assert before != 9 and after == 9


@pytest.fixture
async def signal(
    env: LocalEnvironment, session: Browserless, witness: Witness
) -> AsyncIterator[httpx.AsyncClient]:
    async with await user_client(env, witness, "signal-watcher", session.subject) as http:
        yield http


async def test_refused_watcher_forms_change_nothing_and_probe_nothing(
    session: Browserless, signal: httpx.AsyncClient
) -> None:
    async with Target() as target:
        target.answer_price(7)
        body = {"name": "csrf watch", "agent_id": "a", "url": target.url, "method": "GET", "headers": [],
                "interval_minutes": 60, "compare_mode": "HASH", "prompt_template": "{diff}"}  # fmt: skip
        watcher = (await signal.post("/v1/signal-watchers", json=body)).json()["id"]

        async def first_check_done() -> bool:  # due at once when created; the next one is an hour away
            return len((await signal.get(f"/v1/signal-watchers/{watcher}/checks")).json()["items"]) == 1

        await eventually(first_check_done, what="the new watcher's first check")

        async def watcher_state() -> tuple[str, str, int, int]:
            found = (await signal.get(f"/v1/signal-watchers/{watcher}")).json()
            checks = (await signal.get(f"/v1/signal-watchers/{watcher}/checks")).json()["items"]
            return found["status"], found["name"], len(checks), target.requests

        async def watchers() -> int:
            return len((await signal.get("/v1/signal-watchers")).json()["items"])

        before, after = await refused_then_accepted(
            session, f"/watchers/{watcher}/status", {"status": "PAUSED"}, watcher_state
        )
        assert (before[0], after[0]) == ("ACTIVE", "PAUSED")
        await refused_then_accepted(
            session, f"/watchers/{watcher}/status", {"status": "ACTIVE"}, watcher_state
        )
        form = {**{k: str(v) for k, v in body.items() if k != "headers"}, "name": "renamed watch"}
        before, after = await refused_then_accepted(session, f"/watchers/{watcher}", form, watcher_state)
        assert after[1] == "renamed watch"
        before, after = await refused_then_accepted(
            session, f"/watchers/{watcher}/test", {}, watcher_state, accepted=200
        )
        assert after[3] == before[3] + 1, (
            "the accepted test-now probed the target once; the refused ones never"
        )
        before, after = await refused_then_accepted(session, "/watchers", form, watchers)
        assert after == before + 1


async def test_refused_upload_calls_open_and_fill_no_session(
    env: LocalEnvironment, session: Browserless, witness: Witness
) -> None:
    token = await user_token(env, "media-worker", session.subject)
    witness.secrets.add(token)
    key = f"csrf-{uuid.uuid4().hex[:8]}"
    init = {
        "upload_key": key,
        "total_bytes": CHUNK_BYTES + 10,
        "chunk_bytes": CHUNK_BYTES,
        "title": "t",
        "content_type": "video/mp4",
    }
    async with client(env.url("media-worker"), witness, {"Authorization": f"Bearer {token}"}) as media:

        async def received() -> tuple[int, list[int]]:
            """Re-init with the same key: 201 while no session exists, else 200 with what it received."""
            answer = await media.post("/v1/uploads", json=init)
            return answer.status_code, answer.json().get("received", [])

        for token_sent in (None, WRONG_TOKEN):
            headers = {} if token_sent is None else {"X-CSRF-Token": token_sent}
            answer = await session.http.post("/media/uploads", json=init, headers=headers)
            assert answer.status_code == 403
        assert await received() == (201, []), "no refused init opened the session: this one did"
        opened = (await media.post("/v1/uploads", json=init)).json()["session_id"]
        chunk = f"/media/uploads/{opened}/chunks/0"
        for token_sent in (None, WRONG_TOKEN):
            headers = {"Content-Type": "application/octet-stream"}
            if token_sent is not None:
                headers["X-CSRF-Token"] = token_sent
            assert (await session.http.put(chunk, content=FIRST_CHUNK, headers=headers)).status_code == 403
            complete = await session.http.post(f"/media/uploads/{opened}/complete", headers=headers)
            assert complete.status_code == 403
        assert await received() == (200, [])
        accepted = await session.http.put(
            chunk,
            content=FIRST_CHUNK,
            headers={"X-CSRF-Token": session.csrf, "Content-Type": "application/octet-stream"},
        )
        assert accepted.status_code == 200, accepted.text
        assert await received() == (200, [0])


async def test_a_refused_sign_out_or_login_form_keeps_the_session(session: Browserless) -> None:
    for path, data in (
        ("/sign-out", {}),
        ("/oidc/login", {"subject": "mallory", "permission": "sense:operate"}),
    ):
        for token in (None, WRONG_TOKEN):
            assert (await session.post(path, data, token=token)).status_code == 403
        page = await session.http.get("/watchers/new")
        assert page.status_code == 200 and session.subject in page.text and "mallory" not in page.text
    accepted = await session.post("/sign-out", {}, token=session.csrf)
    assert accepted.status_code == 303 and "/oauth2/sessions/logout?" in accepted.headers["location"]
    assert (await session.http.get("/watchers/new")).status_code == 303
