"""Sign-in, end to end in process: `/sign-in` -> the provider (a Hydra-shaped fake on loopback) -> the
console's dev login page -> consent -> `/oidc/callback` -> signed in; the callback's refusals; sign-out.

What the provider gets is checked at the provider: authorization code + PKCE (S256) with `state` and
`nonce`, `openid offline_access` and the permissions, the five audiences, the code exchanged with
`client_secret_basic`; the consent grants exactly what the login allowed. Every error page has a stable code
and shows nothing of the request."""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from console.domain.sign_in import PENDING_SIGN_IN_SECONDS, PendingSignIn
from console.entrypoints.session import COOKIE_NAME, Session, Sessions
from tests.unit.console.conftest import ClientFactory, ConsoleClient, csrf_in, follow, login_page, signed_in
from tests.unit.console.provider import CLIENT_ID, FakeProvider
from yovision_platform.security import load_key_file
from yovision_platform.web import AUDIENCES, PERMISSIONS

MARKER = "x7q-echo"


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


async def _at_the_callback(client: ConsoleClient, subject: str = "alice") -> httpx.Response:
    """Signs in up to the provider's redirect to the callback, which is returned unfollowed."""
    csrf = csrf_in((await login_page(client)).text)
    answer = await client.post("/oidc/login", data={"csrf": csrf, "subject": subject})
    for _ in range(10):
        location = answer.headers["location"]
        if urlsplit(location).path == "/oidc/callback":
            return answer
        answer = await client.get(httpx.URL(str(answer.url)).join(location))
    raise AssertionError("never sent to the callback")


async def test_sign_in_sends_the_browser_to_the_provider_with_pkce_state_nonce_scopes_and_audiences(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    client = client_for()
    answer = await client.get("/sign-in")
    assert answer.status_code == 303
    location = answer.headers["location"]
    assert location.startswith(f"{provider.issuer}/oauth2/auth?")  # from the discovery document
    q = _query(location)
    assert q["response_type"] == "code" and q["client_id"] == CLIENT_ID
    assert q["redirect_uri"] == "http://127.0.0.1/oidc/callback"
    assert q["scope"].split() == ["openid", "offline_access", *PERMISSIONS]
    assert q["audience"].split() == list(AUDIENCES)
    assert q["code_challenge_method"] == "S256" and len(q["code_challenge"]) == 43
    assert len(q["state"]) >= 43 and len(q["nonce"]) >= 43 and q["state"] != q["nonce"]
    again = _query((await client.get("/sign-in")).headers["location"])
    assert {again["state"], again["nonce"], again["code_challenge"]}.isdisjoint(q.values())


async def test_the_whole_sign_in_through_the_provider(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    client = client_for()
    await signed_in(client, "alice", "sense:operate", "media:drain")
    page = await client.get("/watchers/new")
    assert page.status_code == 200 and "alice" in page.text
    assert 'href="/devices"' in page.text and 'href="/audit"' not in page.text  # the granted permissions
    [flow] = provider.flows
    assert flow.granted_scopes == ["openid", "offline_access", "sense:operate", "media:drain"]
    assert flow.granted_audiences == list(AUDIENCES)
    assert flow.remember, "the login is remembered: sign-out has a provider session to end"
    [exchange] = provider.token_requests
    assert exchange["grant_type"] == "authorization_code"
    assert exchange["redirect_uri"] == "http://127.0.0.1/oidc/callback"
    digest = hashlib.sha256(exchange["code_verifier"].encode()).digest()
    assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == flow.code_challenge
    assert "client_secret" not in exchange  # client_secret_basic: in the Authorization header


async def test_the_consent_grants_only_what_the_login_allowed_and_that_was_requested(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    client = client_for()
    page = await login_page(client)
    [flow] = provider.flows
    flow.scopes = ["openid", "offline_access", "signal:read", "orphan:read"]  # what the client asked
    answer = await client.post(
        "/oidc/login",
        data={"csrf": csrf_in(page.text), "subject": "bob", "permission": ["sense:operate", "signal:read"]},
    )
    await follow(client, answer)
    assert flow.context == {"permissions": ["sense:operate", "signal:read"]}
    assert flow.granted_scopes == ["openid", "offline_access", "signal:read"]


@pytest.mark.parametrize(
    "state",
    [None, "", "x" * 43, "y" * 129, f"{MARKER}<script>"],
    ids=["none", "empty", "other", "long", "odd"],
)
async def test_a_callback_of_no_sign_in_of_this_session_is_refused_without_echo(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider, state: str | None
) -> None:
    client = client_for()
    callback = await _at_the_callback(client)
    query = _query(callback.headers["location"])
    params = {"code": query["code"] + MARKER, **({"state": state} if state is not None else {})}
    answer = await client.get("/oidc/callback", params=params)
    assert answer.status_code == 400 and "<code>sign_in_state_mismatch</code>" in answer.text
    assert MARKER not in answer.text and 'href="/sign-in"' in answer.text
    assert provider.token_requests == []  # no code was exchanged
    assert (await client.get("/watchers/new")).status_code == 303


async def test_a_callback_from_another_browser_session_is_refused(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    """Login CSRF: the attacker's code and state, delivered to the victim's browser."""
    attacker, victim = client_for(), client_for()
    callback = await _at_the_callback(attacker, "mallory")
    await victim.get("/watchers/new")  # the victim has a session of its own
    answer = await victim.get(callback.headers["location"])
    assert answer.status_code == 400 and "sign_in_state_mismatch" in answer.text
    assert (await victim.get("/watchers/new")).status_code == 303


async def test_a_callback_is_used_once(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    client = client_for()
    callback = await _at_the_callback(client)
    first = await client.get(callback.headers["location"])
    assert (first.status_code, first.headers["location"]) == (303, "/")
    again = await client.get(callback.headers["location"])
    assert again.status_code == 400 and "sign_in_state_mismatch" in again.text


async def test_the_providers_refusal_is_sign_in_denied_without_echo(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    client = client_for()
    state = _query((await client.get("/sign-in")).headers["location"])["state"]
    answer = await client.get(
        "/oidc/callback",
        params={"state": state, "error": "access_denied", "error_description": f"{MARKER} <b>no</b>"},
    )
    assert answer.status_code == 403 and "<code>sign_in_denied</code>" in answer.text
    assert MARKER not in answer.text and "access_denied" not in answer.text


@pytest.mark.parametrize("code", ["", "wrong-code", "c" * 2049], ids=["empty", "wrong", "long"])
async def test_a_code_the_provider_refuses_is_sign_in_refused(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider, code: str
) -> None:
    client = client_for()
    callback = await _at_the_callback(client)
    state = _query(callback.headers["location"])["state"]
    answer = await client.get("/oidc/callback", params={"state": state, "code": code})
    assert answer.status_code == 400 and "<code>sign_in_refused</code>" in answer.text
    assert len(provider.token_requests) == (1 if code == "wrong-code" else 0)
    assert (await client.get("/watchers/new")).status_code == 303


async def test_a_sign_in_older_than_ten_minutes_is_expired(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    client = client_for()
    key = load_key_file(console_env["CONSOLE_SESSION_KEY_FILE"], "key")
    for age, ok in ((PENDING_SIGN_IN_SECONDS - 5, True), (PENDING_SIGN_IN_SECONDS + 1, False)):
        pending = PendingSignIn("s" * 43, "n" * 43, "v" * 64, time.time() - age)
        [value] = Sessions(key, always_secure=False).cookie_values(Session(pending=(pending,)))
        client.cookies.clear()
        client.cookies.set(COOKIE_NAME, value)
        answer = await client.get("/oidc/callback", params={"state": pending.state, "code": "unknown"})
        expected = "<code>sign_in_refused</code>" if ok else "<code>sign_in_expired</code>"
        assert expected in answer.text, (age, answer.status_code)


def _other_key_signer(provider: FakeProvider) -> Callable[[dict[str, Any]], str]:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return lambda claims: jwt.encode(claims, other, algorithm="RS256", headers={"kid": provider.kid})


@pytest.mark.parametrize(
    "forgery",
    ["nonce", "audience", "issuer", "other_key", "expired", "alg_none", "jwk_header"],
)
async def test_an_id_token_that_fails_a_check_is_refused(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider, forgery: str
) -> None:
    signer = provider.sign

    def forged(claims: dict[str, Any]) -> str:
        if "nonce" not in claims:  # the access token
            return signer(claims)
        changed = dict(claims)
        if forgery == "nonce":
            changed["nonce"] = "n" * 43
        elif forgery == "audience":
            changed["aud"] = ["another-client"]
        elif forgery == "issuer":
            changed["iss"] = "http://127.0.0.1:1"
        elif forgery == "expired":
            changed["exp"], changed["iat"] = int(time.time()) - 60, int(time.time()) - 960
        elif forgery == "other_key":
            return _other_key_signer(provider)(changed)
        elif forgery == "alg_none":
            return jwt.encode(changed, None, algorithm="none", headers={"kid": provider.kid})
        elif forgery == "jwk_header":
            return jwt.encode(
                changed, signer_key(), algorithm="RS256", headers={"kid": provider.kid, "jwk": {"kty": "RSA"}}
            )
        return signer(changed)

    def signer_key() -> rsa.RSAPrivateKey:
        from tests.unit.console.provider import _signing_key

        return _signing_key()

    provider.sign = forged  # type: ignore[method-assign]
    client = client_for()
    callback = await _at_the_callback(client)
    answer = await client.get(callback.headers["location"])
    assert answer.status_code == 400 and "<code>id_token_invalid</code>" in answer.text
    assert (await client.get("/watchers/new")).status_code == 303


async def test_an_unreachable_provider_is_a_503_page(
    console_env: dict[str, str], client_for: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONSOLE_OIDC_ISSUER", console_env["CONSOLE_SENSE_URL"])  # a closed port
    answer = await client_for().get("/sign-in")
    assert answer.status_code == 503 and "<code>identity_provider_unavailable</code>" in answer.text


async def test_sign_out_revokes_ends_the_provider_session_and_signing_in_asks_for_the_login_again(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    client = client_for()
    csrf = await signed_in(client, "alice")
    [chain] = provider.chains.values()
    answer = await client.post("/sign-out", data={"csrf": csrf})
    assert answer.status_code == 303
    location = answer.headers["location"]
    assert location.startswith(f"{provider.issuer}/oauth2/sessions/logout?")
    q = _query(location)
    assert q["post_logout_redirect_uri"] == "http://127.0.0.1/" and len(q["state"]) >= 16
    assert jwt.decode(q["id_token_hint"], options={"verify_signature": False})["sub"] == "alice"
    assert chain.revoked and len(provider.revocations) == 1
    cleared = [v for k, v in answer.headers.multi_items() if k == "set-cookie" and v.startswith(COOKIE_NAME)]
    assert cleared and all("max-age=0" in c.lower() for c in cleared)
    landed = await follow(client, answer)  # logout page, the provider, `/`, `/sign-in`, the login page
    assert urlsplit(str(landed.url)).path == "/oidc/login"
    assert 'id="subject"' in landed.text, "a fresh login: the provider's session ended"
    assert provider.sessions == {}
    assert (await client.get("/watchers/new")).status_code == 303


async def test_without_sign_out_the_provider_remembers_the_login(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    """The control of the test above: a new sign-in while the provider's session lives fixes the user."""
    client = client_for()
    await signed_in(client, "alice")
    client.cookies.delete(COOKIE_NAME)  # the console's session alone is gone
    page = await login_page(client)
    assert 'id="subject"' not in page.text and "alice" in page.text
    answer = await client.post(
        "/oidc/login", data={"csrf": csrf_in(page.text), "subject": "mallory", "permission": "signal:read"}
    )
    await follow(client, answer)
    assert "alice" in (await client.get("/watchers/new")).text  # the fixed subject, whatever was posted


async def test_sign_out_without_a_session_goes_home(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    client = client_for()
    page = await login_page(client)
    answer = await client.post("/sign-out", data={"csrf": csrf_in(page.text)})
    assert (answer.status_code, answer.headers["location"]) == (303, "/")


async def test_the_provider_error_page_shows_no_input(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    answer = await client_for().get(
        "/oidc/error", params={"error": "invalid_request", "error_description": MARKER}
    )
    assert answer.status_code == 400 and "<code>identity_provider_error</code>" in answer.text
    assert MARKER not in answer.text and "invalid_request" not in answer.text


async def test_the_pages_allow_forms_to_lead_to_the_provider_only(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    """`form-action`: the login form's redirect goes to the provider, and so does sign-out's."""
    client = client_for()
    policy = (await login_page(client)).headers["content-security-policy"]
    [form_action] = [d for d in policy.split(";") if d.strip().startswith("form-action")]
    assert form_action.split()[1:] == ["'self'", provider.issuer]


async def test_a_provider_of_one_audience_per_token_is_asked_for_that_one(
    console_env: dict[str, str], client_for: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Auth0's way (docs/runbooks/identity.md): one API for the five services."""
    monkeypatch.setenv("CONSOLE_OIDC_AUDIENCES", "api://yovision")
    answer = await client_for().get("/sign-in")
    assert _query(answer.headers["location"])["audience"] == "api://yovision"


async def test_permissions_granted_as_roles_are_read_through_the_mapping(
    console_env: dict[str, str], client_for: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keycloak's way: a role (here the fake's `scp` claim stands for `realm_access.roles`) mapped to
    permissions by the same setting the services take; the granted scopes then do not count."""
    monkeypatch.setenv("CONSOLE_OIDC_PERMISSIONS_CLAIM", "scp")
    monkeypatch.setenv("CONSOLE_OIDC_PERMISSIONS_MAP", '{"signal:read": ["bell:audit-read"]}')
    client = client_for()
    await signed_in(client, "alice", "signal:read", "sense:operate")
    page = (await client.get("/watchers/new")).text
    assert 'href="/audit"' in page and 'href="/devices"' not in page
