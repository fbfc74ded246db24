"""Signed cookie sessions: flags (HttpOnly, SameSite, Secure except dev sign-in on loopback), a tampered
or foreign cookie is a fresh anonymous session, expiry at 8 h to the second; production identity comes only
from the forwarded bearer token."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import httpx
import pytest
from itsdangerous import TimestampSigner, URLSafeTimedSerializer

from console.entrypoints.session import COOKIE_NAME, SESSION_MAX_AGE_SECONDS, session_serializer
from tests.unit.console.conftest import PROD_ISSUER, ClientFactory, signed_in
from yovision_platform.auth import TokenVerifier
from yovision_platform.signing import load_key_file

IDENTITY_ONLY_PAGE = "/watchers/new"  # needs a signed-in user, calls no API


def _set_cookie(response: httpx.Response) -> str:
    [header] = [v for k, v in response.headers.multi_items() if k == "set-cookie"]
    return header


def _attributes(header: str) -> set[str]:
    return {part.strip().split("=", 1)[0].lower() for part in header.split(";")[1:]}


def _serializer_at(key: bytes, at: int) -> URLSafeTimedSerializer:
    """The console's serializer with its signer's clock set to ``at`` (itsdangerous reads the time there)."""

    class ClockedSigner(TimestampSigner):
        def get_timestamp(self) -> int:
            return at

    serializer = session_serializer(key)
    serializer.signer = ClockedSigner
    return serializer


def _forged(console_env: dict[str, str], *, age_seconds: int, key: bytes | None = None) -> str:
    key = key or load_key_file(console_env["CONSOLE_SESSION_KEY_FILE"], "key")
    data = {"c": "c" * 43, "s": "alice", "p": [], "f": None}
    return _serializer_at(key, int(time.time()) - age_seconds).dumps(data)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
async def test_on_loopback_the_dev_cookie_is_not_secure_but_httponly_and_samesite(
    console_env: dict[str, str], client_for: ClientFactory, host: str
) -> None:
    client = client_for(host)
    header = _set_cookie(await client.get("/sign-in"))
    assert header.startswith(f"{COOKIE_NAME}=")
    assert {"httponly", "samesite", "path", "max-age"} <= _attributes(header)
    assert "secure" not in _attributes(header)
    assert "samesite=lax" in header.lower() and f"max-age={SESSION_MAX_AGE_SECONDS}" in header.lower()


@pytest.mark.parametrize("host", ["console.example.com", "10.1.2.3", "127.0.0.1.example.com"])
async def test_off_loopback_the_dev_cookie_is_secure(
    console_env: dict[str, str], client_for: ClientFactory, host: str
) -> None:
    header = _set_cookie(await client_for(host).get("/sign-in"))
    assert {"secure", "httponly", "samesite"} <= _attributes(header)


async def test_behind_the_oidc_proxy_the_cookie_is_always_secure(
    production_env: Path, client_for: ClientFactory
) -> None:
    """The proxy often forwards its upstream's own Host (127.0.0.1): the browser still talks https."""
    token = TokenVerifier.from_key_file(production_env, "k", issuer=PROD_ISSUER, audience="console").mint(
        "bob"
    )
    client = client_for("127.0.0.1")
    answer = await client.get(IDENTITY_ONLY_PAGE, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200
    assert {"secure", "httponly", "samesite"} <= _attributes(_set_cookie(answer))


async def test_the_cookie_is_signed_with_hmac_sha256(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    client = client_for()
    await signed_in(client, "alice")
    signature = client.cookies[COOKIE_NAME].rpartition(".")[2]
    assert len(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))) == 32  # SHA-1 would be 20


async def test_a_signed_in_session_opens_identity_pages(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    client = client_for()
    assert (await client.get(IDENTITY_ONLY_PAGE)).status_code == 303
    await signed_in(client, "alice")
    page = await client.get(IDENTITY_ONLY_PAGE)
    assert page.status_code == 200 and "alice" in page.text


async def test_a_tampered_cookie_is_a_fresh_anonymous_session(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    client = client_for()
    await signed_in(client, "alice")
    cookie = client.cookies[COOKIE_NAME]
    payload, _, signature = cookie.rpartition(".")
    # The first character: all its six bits count (the last one of base64 carries padding bits too).
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    for tampered in (f"{payload}.{flipped}", "x" + cookie[1:], cookie + "x", "garbage", ""):
        client.cookies.set(COOKIE_NAME, tampered)
        answer = await client.get(IDENTITY_ONLY_PAGE)
        assert (answer.status_code, answer.headers.get("location")) == (303, "/sign-in"), tampered


async def test_a_cookie_signed_with_another_key_is_refused(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    client = client_for()
    client.cookies.set(COOKIE_NAME, _forged(console_env, age_seconds=0, key=b"k" * 32))
    assert (await client.get(IDENTITY_ONLY_PAGE)).status_code == 303


@pytest.mark.parametrize(
    ("age_seconds", "signed_in_still"),
    [(0, True), (SESSION_MAX_AGE_SECONDS - 60, True), (SESSION_MAX_AGE_SECONDS + 2, False), (10**6, False)],
)
async def test_a_session_expires_after_eight_hours(
    console_env: dict[str, str], client_for: ClientFactory, age_seconds: int, signed_in_still: bool
) -> None:
    client = client_for()
    client.cookies.set(COOKIE_NAME, _forged(console_env, age_seconds=age_seconds))
    answer = await client.get(IDENTITY_ONLY_PAGE)
    assert answer.status_code == (200 if signed_in_still else 303)


async def test_sign_out_ends_the_session(console_env: dict[str, str], client_for: ClientFactory) -> None:
    client = client_for()
    csrf = await signed_in(client, "alice")
    assert (await client.post("/sign-out", data={"csrf": csrf})).status_code == 303
    assert (await client.get(IDENTITY_ONLY_PAGE)).status_code == 303


async def test_a_new_sign_in_gets_a_new_csrf_token(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    """No session fixation: the anonymous session's token does not survive the sign-in."""
    client = client_for()
    anonymous = (await client.get("/sign-in")).text
    signed = await signed_in(client, "alice")
    assert f'data-csrf="{signed}"' not in anonymous


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Basic abc",
        "Bearer not-a-jwt",
        "wrong-audience",
        "wrong-issuer",
        "expired",
    ],
)
async def test_production_pages_need_a_valid_forwarded_token(
    production_env: Path, client_for: ClientFactory, authorization: str | None
) -> None:
    def mint(issuer: str = PROD_ISSUER, audience: str = "console", now: float | None = None) -> str:
        verifier = TokenVerifier.from_key_file(production_env, "k", issuer=issuer, audience=audience)
        return "Bearer " + verifier.mint("bob", ttl_seconds=60, now=now)

    forged = {
        "wrong-audience": mint(audience="signal-watcher"),
        "wrong-issuer": mint(issuer="yovision-dev"),
        "expired": mint(now=time.time() - 3600),
    }
    headers = {} if authorization is None else {"Authorization": forged.get(authorization, authorization)}
    client = client_for()
    answer = await client.get(IDENTITY_ONLY_PAGE, headers=headers)
    assert answer.status_code == 401 and "unauthorized" in answer.text
    assert (await client.get("/sign-in")).status_code == 404  # no dev sign-in to fall back on
