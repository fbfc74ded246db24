"""The OpenID provider as the services see it: the real ORY Hydra and the in-process `LocalIssuer` issue
tokens that one `AccessTokenVerifier` takes and refuses alike, and rotate keys alike."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.issuers import HydraIssuer, Issuer, LocalIssuer, hydra_issuer
from tests.support.kafka import wait_until
from tests.support.stack import Stack
from yovision_platform.tools import hydra
from yovision_platform.web import AccessTokenVerifier, AuthError, Identity, IssuerKeys

AUDIENCE = "signal-watcher"
WAIT_SECONDS = 20.0


class IssuerContract:
    @pytest.fixture
    async def verifier(self, issuer: Issuer) -> AsyncIterator[AccessTokenVerifier]:
        async with issuer.jwks_client() as http:
            keys = IssuerKeys(
                issuer.jwks_url, frozenset({"RS256"}), http, refresh_seconds=0.2, unknown_kid_interval=0.2
            )
            yield AccessTokenVerifier(keys, issuer.issuer, AUDIENCE)
            await keys.aclose()

    async def test_a_user_token_names_the_user_and_the_granted_permissions(
        self, issuer: Issuer, verifier: AccessTokenVerifier
    ) -> None:
        token = await issuer.user_token("alice@example.org", ["signal:read"], [AUDIENCE])
        assert await verifier.verify(token) == Identity("alice@example.org", frozenset({"signal:read"}))

    async def test_a_machine_token_names_the_client(
        self, issuer: Issuer, verifier: AccessTokenVerifier
    ) -> None:
        token = await issuer.machine_token(
            "bench", ["signal:read", "sense:read"], [AUDIENCE, "bell-receiver"]
        )
        assert await verifier.verify(token) == Identity("bench", frozenset({"signal:read", "sense:read"}))

    async def test_an_unknown_client_gets_no_token(self, issuer: Issuer) -> None:
        with pytest.raises(RuntimeError):
            await issuer.machine_token("nobody", ["signal:read"], [AUDIENCE])

    async def test_a_token_for_another_audience_is_refused(
        self, issuer: Issuer, verifier: AccessTokenVerifier
    ) -> None:
        token = await issuer.machine_token("bench", ["signal:read"], ["bell-receiver"])
        with pytest.raises(AuthError):
            await verifier.verify(token)

    async def test_a_new_key_verifies_without_a_restart_and_a_retired_one_stops(
        self, issuer: Issuer, verifier: AccessTokenVerifier
    ) -> None:
        old = await issuer.machine_token("bench", ["signal:read"], [AUDIENCE])
        await verifier.verify(old)
        [old_kid] = await issuer.key_ids()
        await issuer.rotate("contract-rotated")
        new = await issuer.machine_token("bench", ["signal:read"], [AUDIENCE])

        async def verifies(token: str) -> bool:
            try:
                await verifier.verify(token)
            except AuthError:
                return False
            return True

        await wait_until(lambda: verifies(new), timeout_seconds=WAIT_SECONDS)
        assert await verifies(old)
        await issuer.retire(old_kid)

        async def old_refused() -> bool:
            return not await verifies(old)

        await wait_until(old_refused, timeout_seconds=WAIT_SECONDS)
        assert await verifies(new)


class TestFakeIssuer(IssuerContract):
    @pytest.fixture
    def issuer(self) -> Issuer:
        return LocalIssuer()


@pytest.fixture(scope="module")
async def real_hydra(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[HydraIssuer]:
    """One Hydra for the module (3 s to migrate and start): the key rotation, last of its class, is the
    only test that changes it."""
    async with hydra_issuer(stack.admin_dsn, tmp_path_factory.mktemp("hydra")) as real:
        yield real


class TestRealHydra(IssuerContract):
    @pytest.fixture
    def issuer(self, real_hydra: HydraIssuer) -> HydraIssuer:
        return real_hydra

    async def test_a_sign_in_yields_refresh_and_id_tokens_and_a_15_minute_access_token(
        self, issuer: HydraIssuer
    ) -> None:
        tokens = await hydra.signed_in_tokens(
            issuer.issuer,
            issuer.admin,
            issuer.users,
            issuer.secrets[issuer.users.client_id],
            subject="alice@example.org",
            permissions=["signal:read"],
            audiences=[AUDIENCE],
        )
        assert tokens.refresh_token and tokens.id_token and 0 < tokens.expires_in <= 15 * 60
