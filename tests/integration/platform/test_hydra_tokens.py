"""The access-token verifier against the real ORY Hydra: the tokens it issues verify, with the subject and
the permissions it granted; another audience, a rotated-out key and a stopped JWKS endpoint behave as
`yovision_platform.access_tokens` promises."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from tests.conftest import Stack, free_port, unique_name
from tests.integration.platform.kafka_helpers import wait_until
from yovision_platform.access_tokens import AccessTokenVerifier
from yovision_platform.auth import AuthError, Identity
from yovision_platform.db import Identifier
from yovision_platform.jwks import IssuerKeys
from yovision_platform.tools import hydra
from yovision_platform.tools.hydra import ClientSpec, HydraAdmin, HydraInstance

pytestmark = pytest.mark.xdist_group("hydra-tokens")  # one Hydra for the module, its tests in order

AUDIENCE = "signal-watcher"
MACHINE = ClientSpec(
    "bench-client", scopes=("signal:read", "sense:read"), audiences=(AUDIENCE, "bell-receiver")
)
USERS = ClientSpec(
    "dev-token",
    scopes=("openid", "offline_access", "signal:read", "sense:operate"),
    audiences=(AUDIENCE, "bell-receiver"),
    grant_types=("authorization_code", "refresh_token"),
    redirect_uris=("http://127.0.0.1:9/callback",),
)
WAIT_SECONDS = 20.0


@dataclass
class Provider:
    instance: HydraInstance
    admin: HydraAdmin
    secret: str

    async def machine(self, audiences: tuple[str, ...] = (AUDIENCE,)) -> str:
        return await hydra.machine_token(
            self.instance.issuer, MACHINE.client_id, self.secret, scopes=["signal:read"], audiences=audiences
        )


@pytest.fixture(scope="module")
async def provider(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Provider]:
    role = Identifier(unique_name("hydra"))
    dsn = await hydra.create_database_role(stack.admin_dsn, role, secrets.token_urlsafe(24))
    instance = HydraInstance(
        public_port=free_port(),
        admin_port=free_port(),
        dsn=dsn,
        system_secret=secrets.token_urlsafe(32),
        console_url="http://127.0.0.1:9",
        work_dir=tmp_path_factory.mktemp("hydra"),
    )
    secret = secrets.token_urlsafe(32)
    try:
        async with hydra.hydra_environment(instance) as admin:
            for client in (MACHINE, USERS):
                await admin.ensure_client(client, secret)
            yield Provider(instance, admin, secret)
    finally:
        await hydra.drop_database_role(stack.admin_dsn, role)


@pytest.fixture
async def verifier(provider: Provider) -> AsyncIterator[AccessTokenVerifier]:
    async with httpx.AsyncClient() as http:
        keys = IssuerKeys(
            f"{provider.instance.issuer}/.well-known/jwks.json",
            frozenset({"RS256", "ES256"}),
            http,
            refresh_seconds=0.5,
            unknown_kid_interval=0.5,
        )
        yield AccessTokenVerifier(keys, provider.instance.issuer, AUDIENCE)
        await keys.aclose()


async def test_a_machine_token_names_the_client_and_its_granted_scopes(
    provider: Provider, verifier: AccessTokenVerifier
) -> None:
    identity = await verifier.verify(await provider.machine())
    assert identity == Identity(MACHINE.client_id, frozenset({"signal:read"}))


async def test_a_signed_in_user_token_names_the_user_and_the_permissions_granted_at_consent(
    provider: Provider, verifier: AccessTokenVerifier
) -> None:
    tokens = await hydra.signed_in_tokens(
        provider.instance.issuer,
        provider.admin,
        USERS,
        provider.secret,
        subject="alice@example.org",
        permissions=["signal:read"],
        audiences=[AUDIENCE],
    )
    assert tokens.refresh_token and tokens.id_token and 0 < tokens.expires_in <= 15 * 60
    identity = await verifier.verify(tokens.access_token)
    assert identity == Identity("alice@example.org", frozenset({"signal:read"}))


async def test_a_token_for_another_service_is_refused(
    provider: Provider, verifier: AccessTokenVerifier
) -> None:
    with pytest.raises(AuthError):
        await verifier.verify(await provider.machine(audiences=("bell-receiver",)))


async def test_a_rotated_key_verifies_at_once_and_a_removed_one_stops_verifying(
    provider: Provider, verifier: AccessTokenVerifier
) -> None:
    old_token = await provider.machine()
    await verifier.verify(old_token)
    [old_kid] = await provider.admin.signing_key_ids()
    await provider.admin.add_signing_key("rotated-1")
    new_token = await provider.machine()

    async def verifies(token: str) -> bool:
        try:
            await verifier.verify(token)
        except AuthError:
            return False
        return True

    # the same verifier, no restart: at the latest once the unknown-kid interval since the last fetch is over
    await wait_until(lambda: verifies(new_token), timeout_seconds=WAIT_SECONDS)
    assert await verifies(old_token)  # both keys are in the set
    await provider.admin.remove_signing_key(old_kid)

    async def old_refused() -> bool:
        return not await verifies(old_token)

    await wait_until(old_refused, timeout_seconds=WAIT_SECONDS)
    assert (await verifier.verify(new_token)).subject == MACHINE.client_id
