"""Encrypted cookie sessions: flags (HttpOnly, SameSite=Lax, Secure except the dev login on loopback, always
without it), nothing of the session readable in the cookie, every Set-Cookie under 4,096 bytes (numbered
cookies beyond one), a tampered, foreign-key, incomplete or expired cookie is a fresh anonymous session,
expiry at 8 h to the minute, no session fixation."""

from __future__ import annotations

import base64
import json
import time
from http.cookies import SimpleCookie

import httpx
import pytest
from fastapi import Request, Response

from console.domain.identity import PERMISSIONS
from console.domain.sign_in import PendingSignIn, SignedIn, Tokens
from console.entrypoints.session import (
    COOKIE_CHUNKS_MAX,
    COOKIE_NAME,
    SESSION_MAX_AGE_SECONDS,
    SET_COOKIE_MAX_BYTES,
    Session,
    Sessions,
    SessionTooLarge,
    cookie_name,
)
from tests.unit.console.conftest import ClientFactory, login_page, signed_in
from tests.unit.console.provider import FakeProvider
from yovision_platform.security import load_key_file
from yovision_platform.web import PERMISSIONS as ALL_PERMISSIONS

IDENTITY_ONLY_PAGE = "/watchers/new"  # needs a signed-in user, calls no API
LONGEST_SUBJECT = "s" * 128


def _set_cookies(response: httpx.Response) -> list[str]:
    return [v for k, v in response.headers.multi_items() if k == "set-cookie"]


def _attributes(header: str) -> set[str]:
    return {part.strip().split("=", 1)[0].lower() for part in header.split(";")[1:]}


def _session_key(console_env: dict[str, str]) -> bytes:
    return load_key_file(console_env["CONSOLE_SESSION_KEY_FILE"], "key")


def _request(cookies: dict[str, str], host: str = "127.0.0.1") -> Request:
    header = "; ".join(f"{k}={v}" for k, v in cookies.items()).encode()
    headers = [(b"host", host.encode()), (b"cookie", header)]
    scope = {"type": "http", "method": "GET", "path": "/", "query_string": b"", "scheme": "http"}
    return Request({**scope, "server": (host, 80), "headers": headers})


def _tokens(size: int) -> Tokens:
    return Tokens("a" * size, "ory_rt_" + "r" * 86, "i" * 1200, time.time() + 900)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
async def test_with_the_dev_login_on_loopback_the_cookie_is_not_secure_but_httponly_and_lax(
    console_env: dict[str, str], client_for: ClientFactory, host: str
) -> None:
    client = client_for(host)
    [header] = _set_cookies(await client.get(IDENTITY_ONLY_PAGE))
    assert header.startswith(f"{COOKIE_NAME}=")
    assert {"httponly", "samesite", "path", "max-age"} <= _attributes(header)
    assert "secure" not in _attributes(header)
    assert "samesite=lax" in header.lower() and f"max-age={SESSION_MAX_AGE_SECONDS}" in header.lower()


@pytest.mark.parametrize("host", ["console.example.com", "10.1.2.3", "127.0.0.1.example.com"])
async def test_off_loopback_the_dev_login_cookie_is_secure(
    console_env: dict[str, str], client_for: ClientFactory, host: str
) -> None:
    [header] = _set_cookies(await client_for(host).get(IDENTITY_ONLY_PAGE))
    assert {"secure", "httponly", "samesite"} <= _attributes(header)


async def test_without_the_dev_login_the_cookie_is_always_secure(
    production_env: dict[str, str], client_for: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy often forwards its upstream's own Host (127.0.0.1): the browser still talks https."""
    monkeypatch.setenv("CONSOLE_OIDC_ISSUER", "https://sso.example.com")
    monkeypatch.delenv("CONSOLE_DEV_LOGIN_ADMIN_URL")
    [header] = _set_cookies(await client_for("127.0.0.1").get(IDENTITY_ONLY_PAGE))
    assert {"secure", "httponly", "samesite"} <= _attributes(header)


async def test_a_signed_in_cookie_holds_nothing_readable_and_each_stays_under_4096_bytes(
    console_env: dict[str, str],
    client_for: ClientFactory,
    provider: FakeProvider,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The longest user id and every permission: the five-audience access token, the refresh token and the
    ID token; the fake's tokens have the claims (and so the size) of Hydra's."""
    client = client_for()
    csrf = await login_page(client)
    answer = await client.post(
        "/oidc/login", data={"csrf": csrf.text.split('data-csrf="')[1].split('"')[0],
                             "subject": LONGEST_SUBJECT, "permission": list(ALL_PERMISSIONS)},
    )  # fmt: skip
    headers: list[str] = []
    while answer.status_code in (302, 303):
        headers += _set_cookies(answer) if answer.url.host == "127.0.0.1" and answer.url.port is None else []
        answer = await client.get(httpx.URL(answer.url).join(answer.headers["location"]))
    session_cookies = [h for h in headers if h.startswith(COOKIE_NAME)]
    assert session_cookies, "the callback set the session"
    sizes = [len(h.encode()) for h in session_cookies]
    assert all(size < SET_COOKIE_MAX_BYTES for size in sizes), sizes
    issued = provider.token_requests and json.dumps(provider.token_requests)
    assert issued
    # The sealed text is split at arbitrary characters: only the whole of it, in cookie order, decodes.
    chunks = dict(next(iter(SimpleCookie(header).items())) for header in session_cookies)
    sealed = "".join(chunks[name].value for name in sorted(chunks, key=lambda n: (len(n), n)))
    opened = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4)).decode("latin-1")
    jwt_header = provider.sign({"sub": "x"}).split(".")[0]  # every token the fake signs starts with it
    readable = [jwt_header, LONGEST_SUBJECT, *provider.refresh_tokens]
    assert not [secret for secret in readable if secret in sealed or secret in opened]
    with capsys.disabled():
        print(f"\nsigned-in Set-Cookie sizes (bytes): {sizes}")


def test_a_session_larger_than_one_cookie_is_split_and_read_back_whole(console_env: dict[str, str]) -> None:
    sessions = Sessions(_session_key(console_env), always_secure=False)
    session = Session(user=SignedIn("alice", frozenset(PERMISSIONS), _tokens(3000)), changed=True)
    values = sessions.cookie_values(session)
    assert len(values) == 2
    response = Response()
    sessions.store(_request({}), response, session)
    headers = response.headers.getlist("set-cookie")
    assert [h.split("=", 1)[0] for h in headers] == [cookie_name(0), cookie_name(1)]
    assert all(len(h.encode()) < SET_COOKIE_MAX_BYTES for h in headers)
    back = sessions.load(_request({cookie_name(i): v for i, v in enumerate(values)}))
    assert back.user == session.user and back.csrf == session.csrf and not back.changed
    missing_one = sessions.load(_request({cookie_name(0): values[0]}))
    assert missing_one.user is None and missing_one.changed
    swapped = sessions.load(_request({cookie_name(0): values[1], cookie_name(1): values[0]}))
    assert swapped.user is None


def test_a_session_beyond_the_cookie_limit_is_refused(console_env: dict[str, str]) -> None:
    sessions = Sessions(_session_key(console_env), always_secure=False)
    fits = Session(user=SignedIn("alice", frozenset(), _tokens(6000)))
    assert sessions.fits(fits) and len(sessions.cookie_values(fits)) == COOKIE_CHUNKS_MAX
    too_large = Session(user=SignedIn("alice", frozenset(), _tokens(9000)))
    assert not sessions.fits(too_large)
    with pytest.raises(SessionTooLarge):
        sessions.cookie_values(too_large)


def test_a_smaller_session_deletes_the_numbered_cookies_it_no_longer_needs(
    console_env: dict[str, str],
) -> None:
    sessions = Sessions(_session_key(console_env), always_secure=False)
    big = sessions.cookie_values(Session(user=SignedIn("alice", frozenset(), _tokens(4000))))
    response = Response()
    sessions.store(_request({cookie_name(i): v for i, v in enumerate(big)}), response, Session(changed=True))
    headers = response.headers.getlist("set-cookie")
    assert headers[0].startswith(f"{cookie_name(0)}=") and "max-age=0" not in headers[0].lower()
    assert headers[1].startswith(f'{cookie_name(1)}=""') and "max-age=0" in headers[1].lower()
    ended = Response()
    sessions.store(
        _request({cookie_name(i): v for i, v in enumerate(big)}), ended, Session(changed=True, ended=True)
    )
    assert all("max-age=0" in h.lower() for h in ended.headers.getlist("set-cookie"))
    assert len(ended.headers.getlist("set-cookie")) == len(big) == 3


async def test_a_signed_in_session_opens_identity_pages(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    client = client_for()
    answer = await client.get(IDENTITY_ONLY_PAGE)
    assert (answer.status_code, answer.headers["location"]) == (303, "/sign-in")
    await signed_in(client, "alice")
    page = await client.get(IDENTITY_ONLY_PAGE)
    assert page.status_code == 200 and "alice" in page.text


async def test_a_tampered_cookie_is_a_fresh_anonymous_session(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    client = client_for()
    await signed_in(client, "alice")
    cookie = client.cookies[COOKIE_NAME]
    flipped = cookie[:40] + ("A" if cookie[40] != "A" else "B") + cookie[41:]
    # A first character that differs: "x" + cookie[1:] was the cookie itself when it began with "x" (1 in 64).
    first = ("y" if cookie[0] == "x" else "x") + cookie[1:]
    for tampered in (flipped, first, cookie[:-1], cookie + "x", "garbage", "", cookie[:16]):
        client.cookies.set(COOKIE_NAME, tampered)
        answer = await client.get(IDENTITY_ONLY_PAGE)
        assert (answer.status_code, answer.headers.get("location")) == (303, "/sign-in"), tampered


async def test_a_cookie_sealed_with_another_key_is_refused(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    client = client_for()
    forged = Sessions(b"k" * 32, always_secure=False).cookie_values(
        Session(user=SignedIn("alice", frozenset(PERMISSIONS), _tokens(900)))
    )
    client.cookies.set(COOKIE_NAME, forged[0])
    assert (await client.get(IDENTITY_ONLY_PAGE)).status_code == 303


@pytest.mark.parametrize(
    ("age_seconds", "signed_in_still"),
    [(0, True), (SESSION_MAX_AGE_SECONDS - 60, True), (SESSION_MAX_AGE_SECONDS + 2, False), (10**6, False),
     (-30, True), (-120, False)],
)  # fmt: skip
async def test_a_session_expires_eight_hours_after_it_was_last_written(
    console_env: dict[str, str], client_for: ClientFactory, age_seconds: int, signed_in_still: bool
) -> None:
    """A negative age: written in the future (a clock ahead by up to a minute is tolerated)."""
    client = client_for()
    written = time.time() - age_seconds
    aged = Sessions(_session_key(console_env), always_secure=False, clock=lambda: written)
    tokens = Tokens("a" * 900, "r" * 90, "i" * 900, time.time() + 900)
    [value] = aged.cookie_values(Session(user=SignedIn("alice", frozenset(), tokens)))
    client.cookies.set(COOKIE_NAME, value)
    answer = await client.get(IDENTITY_ONLY_PAGE)
    assert answer.status_code == (200 if signed_in_still else 303)


async def test_a_new_sign_in_gets_a_new_csrf_token(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    """No session fixation: the anonymous session's token does not survive the sign-in."""
    client = client_for()
    anonymous = (await login_page(client)).text
    signed = await signed_in(client, "alice")
    assert f'data-csrf="{signed}"' not in anonymous


def test_the_pending_sign_ins_and_the_login_challenge_are_sealed_too(console_env: dict[str, str]) -> None:
    sessions = Sessions(_session_key(console_env), always_secure=False)
    pending = PendingSignIn.start(time.time())
    [value] = sessions.cookie_values(Session(pending=(pending,)))
    assert pending.verifier not in value and pending.state not in value
    assert sessions.load(_request({COOKIE_NAME: value})).pending == (pending,)
