"""Fixtures for bell-receiver: a migrated unique schema, key files, and Bell served over real HTTP.

`served` runs the real FastAPI app under uvicorn inside the test's event loop (real sockets, so body
limits and chunked uploads are exercised on the wire) with an adjustable clock and a short deadline; its
read APIs take the access tokens of an in-process issuer (`LocalIssuer`). Tests that need Bell as its own
process use bell_process.py (tests/support/bell_process.py), with the session's real Hydra as its issuer.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import pytest
from prometheus_client import CollectorRegistry

from bell_receiver.entrypoints.api import mount_api
from bell_receiver.entrypoints.dependencies import BatchChecks
from bell_receiver.entrypoints.main import MIGRATIONS_DIR, postgres_use_cases
from bell_receiver.service_layer.metrics import BellMetrics
from bell_receiver.settings import AUDIENCE
from tests.support.audit_push_client import RelayClient
from tests.support.issuers import LocalIssuer
from tests.support.postgres import migrated_schema_fixture, runtime_pool_fixture
from tests.support.served_app import serve_app
from tests.support.stack import MigratedSchema, private_file
from yovision_platform.security import KeyRing
from yovision_platform.storage import Identifier, SchemaPlan
from yovision_platform.web import create_app, use_access_token_verifier

TEST_DEADLINE_SECONDS = 1.0
KEY_ID = "relay-test-1"


@dataclass(frozen=True)
class Keys:
    relay_hex: str
    relay_file: Path

    @property
    def signing_ring(self) -> KeyRing:
        return KeyRing.from_key_files({KEY_ID: self.relay_file}, "test", active_key_id=KEY_ID)

    @property
    def verify_ring(self) -> KeyRing:
        return KeyRing.from_key_files({KEY_ID: self.relay_file}, "test")


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    relay_hex = secrets.token_hex(32)
    return Keys(relay_hex, private_file(tmp_path / "relay.key", relay_hex + "\n"))


@pytest.fixture(scope="session")
def local_issuer() -> LocalIssuer:
    """The in-process issuer of `served`'s access tokens."""
    return LocalIssuer()


def bell_plan(schema: Identifier) -> SchemaPlan:
    return SchemaPlan.for_service(schema, MIGRATIONS_DIR)


bell_schema = migrated_schema_fixture(MIGRATIONS_DIR, name="bell_schema")
runtime_pool = runtime_pool_fixture("bell_schema", name="runtime_pool", max_size=6)


@dataclass
class Clock:
    """Bell's clock in `served`: real time, or frozen at `frozen` when set."""

    frozen: float | None = None

    def __call__(self) -> float:
        return time.time() if self.frozen is None else self.frozen


@dataclass
class Served:
    base_url: str
    port: int
    clock: Clock
    registry: CollectorRegistry
    relay: RelayClient
    schema: MigratedSchema
    pool: asyncpg.Pool
    keys: Keys
    issuer: LocalIssuer

    def bearer(self, subject: str, *permissions: str) -> dict[str, str]:
        """A user's access token for Bell, as an Authorization header."""
        return {"authorization": f"Bearer {self.issuer.token(subject, *permissions, audience=AUDIENCE)}"}

    def metric(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


@pytest.fixture
async def served(
    bell_schema: MigratedSchema, runtime_pool: asyncpg.Pool, keys: Keys, local_issuer: LocalIssuer
) -> AsyncIterator[Served]:
    clock = Clock()
    registry = CollectorRegistry()
    metrics = BellMetrics.create(registry)
    app = create_app("bell-receiver", "test")
    verifier = local_issuer.verifier(AUDIENCE)
    use_access_token_verifier(app, verifier)
    mount_api(
        app,
        use_cases=postgres_use_cases(runtime_pool, Identifier(bell_schema.name), metrics),
        checks=BatchChecks(keys.verify_ring, metrics, clock, TEST_DEADLINE_SECONDS),
    )
    async with serve_app(app) as port:
        base_url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
            yield Served(
                base_url,
                port,
                clock,
                registry,
                RelayClient(http, keys.signing_ring),
                bell_schema,
                runtime_pool,
                keys,
                local_issuer,
            )
    await verifier.keys.aclose()
    await verifier.keys.http.aclose()
