"""Refresh before expiry, with a fake clock: `SignIns.fresh` against a provider that rotates refresh tokens
and takes a reuse as theft (as Hydra does, revoking the chain), then the same through the app.

At the service layer: the boundary of the margin to the second; one refresh for many concurrent requests;
a request still carrying the used refresh token gets the new set, never a second use; a refusal ends the
session; an unreachable provider leaves a valid token in use, and an expired one is an error."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import pytest

from console.domain.sign_in import SignedIn, TokenAnswer, Tokens
from console.entrypoints.session import COOKIE_NAME
from console.service_layer.ports import GrantRefused, ProviderUnavailable
from console.service_layer.sign_in import RefreshOutcome, SessionEnded, SignIns
from tests.unit.console.conftest import ClientFactory, ConsoleClient, signed_in
from tests.unit.console.provider import ACCESS_TOKEN_TTL_SECONDS, FakeProvider

MARGIN = 60.0
LIFETIME = 900


@dataclass
class Clock:
    now: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class RotatingProvider:
    """Rotates refresh tokens; a used one again revokes the chain (`GrantRefused`). `gate` holds a refresh
    until set; `down` answers ProviderUnavailable."""

    clock: Clock
    issued: int = 0
    used: set[str] = field(default_factory=set)
    revoked: bool = False
    down: bool = False
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    calls: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.gate.set()

    async def refresh(self, refresh_token: str) -> TokenAnswer:
        self.calls.append(refresh_token)
        await self.gate.wait()
        if self.down:
            raise ProviderUnavailable()
        if self.revoked or refresh_token in self.used:
            self.revoked = True
            raise GrantRefused("invalid_grant")
        self.used.add(refresh_token)
        self.issued += 1
        return TokenAnswer(
            f"access-{self.issued}", LIFETIME, f"refresh-{self.issued}", None, "openid signal:read"
        )

    async def authorization_url(self, request: object) -> str:
        raise NotImplementedError

    async def exchange_code(self, code: str, *, redirect_uri: str, verifier: str) -> TokenAnswer:
        raise NotImplementedError

    async def verify_id_token(self, id_token: str, *, nonce: str) -> dict[str, object]:
        raise NotImplementedError

    async def revoke(self, refresh_token: str) -> bool:
        return True

    async def end_session_url(
        self, *, id_token_hint: str, post_logout_redirect_uri: str, state: str
    ) -> str | None:
        return None


@dataclass
class Counted:
    outcomes: list[RefreshOutcome] = field(default_factory=list)

    def __call__(self, outcome: RefreshOutcome) -> None:
        self.outcomes.append(outcome)


def _setup(margin: float = MARGIN) -> tuple[SignIns, RotatingProvider, Clock, Counted]:
    clock = Clock()
    provider = RotatingProvider(clock)
    counted = Counted()
    sign_ins = SignIns(provider, (), (), margin, clock=clock, on_refresh=counted)
    return sign_ins, provider, clock, counted


def _session(clock: Clock, seconds_left: float) -> SignedIn:
    tokens = Tokens("access-0", "refresh-0", "id-token", clock.now + seconds_left)
    return SignedIn("alice", frozenset({"sense:operate"}), tokens)


@pytest.mark.parametrize(
    ("seconds_left", "refreshed"),
    [(MARGIN + 1, False), (MARGIN, False), (MARGIN - 1, True), (0, True), (-5, True)],
)
async def test_a_token_is_refreshed_once_it_has_less_than_the_margin_left(
    seconds_left: float, refreshed: bool
) -> None:
    sign_ins, provider, clock, counted = _setup()
    session = _session(clock, seconds_left)
    fresh = await sign_ins.fresh(session)
    if refreshed:
        assert fresh.tokens == Tokens("access-1", "refresh-1", "id-token", clock.now + LIFETIME)
        assert fresh.permissions == {"signal:read"} and fresh.subject == "alice"
        assert counted.outcomes == [RefreshOutcome.REFRESHED]
    else:
        assert fresh is session and provider.calls == [] and counted.outcomes == []


async def test_the_refreshed_set_is_kept_until_it_is_due_itself() -> None:
    sign_ins, provider, clock, _ = _setup()
    fresh = await sign_ins.fresh(_session(clock, 10))
    clock.now += LIFETIME - MARGIN - 1
    assert await sign_ins.fresh(fresh) is fresh
    clock.now += 2
    assert (await sign_ins.fresh(fresh)).tokens.refresh_token == "refresh-2"
    assert provider.calls == ["refresh-0", "refresh-1"]


async def test_concurrent_requests_share_one_refresh() -> None:
    sign_ins, provider, clock, counted = _setup()
    provider.gate.clear()
    session = _session(clock, 10)
    waiting = [asyncio.create_task(sign_ins.fresh(session)) for _ in range(20)]
    await asyncio.sleep(0)
    provider.gate.set()
    results = await asyncio.gather(*waiting)
    assert provider.calls == ["refresh-0"]
    assert {r.tokens.access_token for r in results} == {"access-1"}
    assert counted.outcomes.count(RefreshOutcome.REFRESHED) == 1
    assert counted.outcomes.count(RefreshOutcome.SHARED) == 19


async def test_a_waiter_that_gives_up_does_not_cancel_the_refresh() -> None:
    sign_ins, provider, clock, _ = _setup()
    provider.gate.clear()
    session = _session(clock, 10)
    gone = asyncio.create_task(sign_ins.fresh(session))
    await asyncio.sleep(0)
    gone.cancel()
    provider.gate.set()
    later = await sign_ins.fresh(session)
    assert later.tokens.access_token == "access-1" and provider.calls == ["refresh-0"]


async def test_a_request_with_the_used_refresh_token_gets_the_new_set_not_a_reuse() -> None:
    """The browser sent it before the new cookie arrived, or the answer with the new cookie was lost."""
    sign_ins, provider, clock, counted = _setup()
    old = _session(clock, 10)
    new = await sign_ins.fresh(old)
    clock.now += 30
    again = await sign_ins.fresh(old)
    assert again == new and provider.calls == ["refresh-0"] and not provider.revoked
    assert counted.outcomes == [RefreshOutcome.REFRESHED, RefreshOutcome.SHARED]
    clock.now += LIFETIME - MARGIN - 30 + 1  # the newer set is due in its turn: its refresh token is used
    newest = await sign_ins.fresh(old)
    assert newest.tokens.refresh_token == "refresh-2" and provider.calls == ["refresh-0", "refresh-1"]


async def test_a_refused_refresh_ends_the_session() -> None:
    sign_ins, provider, clock, counted = _setup()
    provider.revoked = True
    with pytest.raises(SessionEnded):
        await sign_ins.fresh(_session(clock, 10))
    assert counted.outcomes == [RefreshOutcome.REFUSED]


async def test_an_unreachable_provider_leaves_a_valid_token_in_use_and_refuses_an_expired_one() -> None:
    sign_ins, provider, clock, counted = _setup()
    provider.down = True
    session = _session(clock, 10)
    assert await sign_ins.fresh(session) is session
    clock.now += 11
    with pytest.raises(ProviderUnavailable):
        await sign_ins.fresh(session)
    provider.down = False
    assert (await sign_ins.fresh(session)).tokens.access_token == "access-1"
    assert counted.outcomes == [RefreshOutcome.FAILED, RefreshOutcome.FAILED, RefreshOutcome.REFRESHED]


async def test_after_sign_out_every_copy_of_the_cookie_is_an_ended_session() -> None:
    """A copy of the cookie taken before a refresh (stolen, or a second tab's) and the newest one alike: the
    process ends them at once, not when their access tokens expire."""
    sign_ins, provider, clock, _ = _setup()
    old = _session(clock, 10)
    new = await sign_ins.fresh(old)
    assert await sign_ins.sign_out(new, "http://127.0.0.1:18080/") is None
    for copy in (old, new):
        with pytest.raises(SessionEnded):
            await sign_ins.fresh(copy)
    assert await sign_ins.sign_out(old, "http://127.0.0.1:18080/") is None  # twice: nothing more to do
    assert provider.calls == ["refresh-0"]
    other = SignedIn("bob", frozenset(), Tokens("access-b", "refresh-b", "id-b", clock.now + 600))
    assert await sign_ins.fresh(other) is other, "another user's session is untouched"


async def test_without_a_refresh_token_the_session_ends_at_expiry() -> None:
    sign_ins, _, clock, _ = _setup()
    session = SignedIn("alice", frozenset(), Tokens("access-0", None, "id", clock.now + 10))
    assert await sign_ins.fresh(session) is session
    clock.now += 10
    with pytest.raises(SessionEnded):
        await sign_ins.fresh(session)


# --- through the app, against the Hydra-shaped provider -----------------------------------------------------


def _due(client: ConsoleClient) -> Clock:
    """The console's sign-in clock, moved to where the session's access token is due."""
    clock = Clock(time.time() + ACCESS_TOKEN_TTL_SECONDS - MARGIN + 1)
    client.console.sign_ins.clock = clock
    return clock


def _metric(client: ConsoleClient, outcome: RefreshOutcome) -> float:
    return client.console.metrics.refreshes.labels(outcome=outcome)._value.get()


async def test_a_page_refreshes_a_due_token_and_stores_the_new_set(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    client = client_for()
    await signed_in(client, "alice", "signal:read")
    before = client.cookies[COOKIE_NAME]
    _due(client)
    page = await client.get("/watchers/new")
    assert page.status_code == 200 and provider.refreshes() == 1
    assert client.cookies[COOKIE_NAME] != before  # the new set, written back
    assert (await client.get("/watchers/new")).status_code == 200
    assert provider.refreshes() == 1, "the stored set is fresh: no second refresh"
    assert _metric(client, RefreshOutcome.REFRESHED) == 1


async def test_concurrent_pages_with_a_due_token_refresh_once_and_stay_signed_in(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    client = client_for()
    await signed_in(client, "alice")
    old_cookie = client.cookies[COOKIE_NAME]
    _due(client)
    pages = await asyncio.gather(*(client.get("/watchers/new") for _ in range(8)))
    assert [p.status_code for p in pages] == [200] * 8 and provider.refreshes() == 1
    client.cookies.clear()
    client.cookies.set(COOKIE_NAME, old_cookie)  # a request that still carries the old cookie
    assert (await client.get("/watchers/new")).status_code == 200
    assert provider.refreshes() == 1 and not any(c.revoked for c in provider.chains.values())


async def test_a_revoked_refresh_token_sends_the_user_to_sign_in(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    client = client_for()
    await signed_in(client, "alice")
    provider.revoke_subject("alice")
    _due(client)
    answer = await client.get("/watchers/new")
    assert (answer.status_code, answer.headers["location"]) == (303, "/sign-in")
    assert _metric(client, RefreshOutcome.REFUSED) == 1
    assert (await client.get("/watchers/new")).status_code == 303, "the tokens are gone from the session"
    assert provider.refreshes() == 1


async def test_refresh_never_sends_a_used_refresh_token_again_across_many_pages(
    console_env: dict[str, str],
    client_for: ClientFactory,
    provider: FakeProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A margin beyond the token's life: every request refreshes, each with the newest refresh token."""
    monkeypatch.setenv("CONSOLE_REFRESH_MARGIN_SECONDS", "3600")
    client = client_for()
    await signed_in(client, "alice")
    for _ in range(5):
        assert (await client.get("/watchers/new")).status_code == 200
    used = [r["refresh_token"] for r in provider.token_requests if r["grant_type"] == "refresh_token"]
    assert len(used) >= 5 and len(set(used)) == len(used)
    assert not any(c.revoked for c in provider.chains.values())


async def test_an_htmx_request_of_an_ended_session_sends_the_whole_page_to_sign_in(
    console_env: dict[str, str], client_for: ClientFactory, provider: FakeProvider
) -> None:
    """A poll's XHR would follow a redirect to the provider's origin and fail in the browser."""
    client = client_for()
    await signed_in(client, "alice")
    provider.revoke_subject("alice")
    _due(client)
    answer = await client.get("/media/rows", headers={"HX-Request": "true"})
    assert (answer.status_code, answer.headers["hx-redirect"]) == (200, "/sign-in")
    assert (await client.get("/media/rows")).headers["location"] == "/sign-in"
