"""What every API's identity rests on, whatever signed the token: the time claims with their leeway, the
subject's shape, the bearer header, and the one 401 and the 403 that names the missing permission.
(`test_access_tokens.py` covers the signature, the key and the issuer's claims.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from yovision_platform.web import install_problem_handlers
from yovision_platform.web._auth import (
    JWT_MAX_TTL_SECONDS,
    AuthError,
    Forbidden,
    Identity,
    bearer_token,
    check_times,
    checked_subject,
)

EXPIRES = 1_800_000_000


def times(expires: int = EXPIRES, ttl: int = 600, **changes: Any) -> dict[str, Any]:
    return {"iat": expires - ttl, "exp": expires, **changes}


def accepted(claims: dict[str, Any], now: float, leeway: int = 5) -> bool:
    try:
        check_times(claims, now=now, leeway_seconds=leeway)
    except AuthError:
        return False
    return True


@pytest.mark.parametrize(
    ("offset", "ok"), [(-1, True), (0, True), (4, True), (5, False), (6, False), (30, False)]
)
def test_an_expired_token_is_accepted_only_within_the_default_5_s_leeway(offset: int, ok: bool) -> None:
    assert accepted(times(), now=EXPIRES + offset) is ok


@pytest.mark.parametrize(
    ("leeway", "offset", "ok"), [(0, -1, True), (0, 0, False), (60, 59, True), (60, 60, False)]
)
def test_the_leeway_is_configurable(leeway: int, offset: int, ok: bool) -> None:
    assert accepted(times(), now=EXPIRES + offset, leeway=leeway) is ok


@pytest.mark.parametrize(("ahead", "ok"), [(4, True), (5, True), (6, False)])
def test_a_token_issued_or_valid_only_in_the_future_is_refused_beyond_the_leeway(
    ahead: int, ok: bool
) -> None:
    now = EXPIRES - 600
    assert accepted(times(iat=now + ahead), now=now) is ok
    assert accepted(times(nbf=now + ahead), now=now) is ok


@pytest.mark.parametrize(("ttl", "ok"), [(JWT_MAX_TTL_SECONDS, True), (JWT_MAX_TTL_SECONDS + 1, False)])
def test_a_token_lives_at_most_a_day(ttl: int, ok: bool) -> None:
    assert accepted(times(ttl=ttl), now=EXPIRES - 10) is ok


@pytest.mark.parametrize("value", ["1800000000", None, True, [EXPIRES]])
def test_a_time_claim_that_is_no_number_is_refused(value: object) -> None:
    assert not accepted(times(exp=value), now=EXPIRES - 10)


@pytest.mark.parametrize(
    ("subject", "ok"),
    [
        ("a" * 128, True),
        ("a" * 129, False),
        ("", False),
        ("alice@example.org", True),
        ("a b", False),
        (7, False),
    ],
)
def test_a_subject_is_1_to_128_safe_characters(subject: object, ok: bool) -> None:
    if ok:
        assert checked_subject({"sub": subject}) == subject
    else:
        with pytest.raises(AuthError):
            checked_subject({"sub": subject})


async def get_guarded(permission: str) -> httpx.Response:
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/guarded")
    def guarded() -> dict[str, str]:
        Identity("alice", frozenset({"signal:read"})).require(permission)
        return {"ok": "yes"}

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        return await http.get("/guarded")


async def test_a_missing_permission_is_403_naming_it_and_a_held_one_passes() -> None:
    assert (await get_guarded("signal:read")).status_code == 200
    refused = await get_guarded("media:drain")
    assert refused.status_code == 403
    body = refused.json()
    assert (body["code"], body["detail"]) == ("forbidden", "requires the permission media:drain")
    assert Forbidden().detail is None


@pytest.mark.parametrize(
    "header", ["", "Bearer", "Bearer ", "Basic abc", "Bearer a b", "bearer", "Token abc"]
)
def test_anything_but_one_bearer_token_is_the_one_401(header: str) -> None:
    class Request:
        headers = {"authorization": header} if header else {}

    with pytest.raises(AuthError) as caught:
        bearer_token(Request())  # type: ignore[arg-type]
    assert str(caught.value) == "unauthorized"
