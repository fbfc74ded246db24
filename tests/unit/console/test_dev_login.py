"""The dev login: the provider's login, consent and logout pages of the local stack. A challenge is checked
(characters, length) before the provider is asked and never shown; one the provider does not know is a
stable error; the login page's user id and permissions are checked as the old sign-in page did; the
challenge waits in the encrypted session, not in the page."""

from __future__ import annotations

import pytest

from console.domain.sign_in import CHALLENGE_PATTERN
from tests.unit.console.conftest import ClientFactory, csrf_in, follow, login_page
from tests.unit.console.provider import FakeProvider

PAGES = ("/oidc/login?login_challenge=", "/oidc/consent?consent_challenge=", "/oidc/logout?logout_challenge=")


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize(
    "challenge",
    ["", "a b", "x7q<script>", "x7q\"'", "a" * 4097, "x7q/..", "x7q%0A"],
    ids=["empty", "space", "markup", "quotes", "too-long", "slash", "newline"],
)
async def test_a_malformed_challenge_is_refused_before_the_provider_is_asked(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider, page: str, challenge: str
) -> None:
    answer = await client_for().get(page + challenge)
    assert answer.status_code == 400 and "<code>invalid_challenge</code>" in answer.text
    assert "x7q" not in answer.text and "a" * 64 not in answer.text
    assert not [r for r in provider.requests if r.startswith(("GET /admin", "PUT /admin"))]


@pytest.mark.parametrize("page", PAGES)
async def test_a_challenge_the_provider_does_not_know_is_refused_without_echo(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider, page: str
) -> None:
    challenge = "a" * 4096  # the longest accepted
    assert CHALLENGE_PATTERN.fullmatch(challenge)
    answer = await client_for().get(page + challenge)
    assert answer.status_code == 400 and "<code>challenge_refused</code>" in answer.text
    assert "a" * 64 not in answer.text
    assert [r for r in provider.requests if "/admin/" in r], "the provider was asked"


async def test_the_login_page_keeps_its_challenge_out_of_the_page(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    page = await login_page(client_for())
    [flow] = provider.flows
    assert flow.login_challenge not in page.text and flow.login_challenge[:32] not in page.text


@pytest.mark.parametrize(
    ("subject", "permissions"),
    [
        ("a b", []),
        ("é", []),
        ("s" * 129, []),
        ("", []),
        ("alice", ["sense:operate", "admin:all"]),
        ("alice", ["x"]),
    ],
    ids=["space", "accent", "too-long", "empty", "unknown-permission", "malformed-permission"],
)
async def test_a_login_the_server_refuses_is_the_page_again_with_422(
    console_env: dict[str, str],
    client_for: ClientFactory,
    provider: FakeProvider,
    subject: str,
    permissions: list[str],
) -> None:
    client = client_for()
    page = await login_page(client)
    answer = await client.post(
        "/oidc/login", data={"csrf": csrf_in(page.text), "subject": subject, "permission": permissions}
    )
    assert answer.status_code == 422 and "invalid_subject" in answer.text and 'id="subject"' in answer.text
    assert "admin:all" not in answer.text
    assert provider.flows[0].login_verifier is None  # not accepted
    retry = await client.post(
        "/oidc/login", data={"csrf": csrf_in(answer.text), "subject": "alice", "permission": "signal:read"}
    )
    assert retry.status_code == 303 and retry.headers["location"].startswith(provider.issuer)
    assert provider.flows[0].subject == "alice"


async def test_a_login_form_without_a_login_in_progress_is_refused(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    client = client_for()
    page = await login_page(client)
    answer = await client.post("/oidc/login", data={"csrf": csrf_in(page.text), "subject": "alice"})
    assert answer.status_code == 303
    again = await client.post("/oidc/login", data={"csrf": csrf_in(page.text), "subject": "mallory"})
    assert again.status_code == 400 and "<code>no_login_in_progress</code>" in again.text
    assert "mallory" not in again.text


async def test_the_logout_page_accepts_the_providers_logout(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    from tests.unit.console.conftest import signed_in

    client = client_for()
    csrf = await signed_in(client, "alice")
    answer = await client.post("/sign-out", data={"csrf": csrf})
    to_logout_page = await client.get(answer.headers["location"])
    assert to_logout_page.headers["location"].startswith("http://127.0.0.1/oidc/logout?logout_challenge=")
    accepted = await client.get(to_logout_page.headers["location"])
    assert accepted.status_code == 303 and "logout_verifier=" in accepted.headers["location"]
    await follow(client, accepted)
    assert provider.sessions == {}
