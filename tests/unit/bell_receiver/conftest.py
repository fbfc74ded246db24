"""bell-receiver's use cases and HTTP API on the in-memory fakes (adapters/memory.py), in milliseconds.

The fakes are proven equal to the PostgreSQL adapters by tests/ports/bell_receiver. What needs PostgreSQL
itself (SQL rules, locks under concurrency), Kafka, a real server on the wire (body limits, the uniform 401's
headers) or a process stays in tests/integration/bell_receiver.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from prometheus_client import CollectorRegistry

from bell_receiver.adapters.memory import MemoryBellUnitOfWork
from bell_receiver.bootstrap import BellUseCases, bootstrap
from bell_receiver.domain.audit import AuditFilter, StoredAuditEvent
from bell_receiver.entrypoints.api import mount_api
from bell_receiver.entrypoints.dependencies import BatchChecks
from bell_receiver.service_layer.metrics import BellMetrics
from bell_receiver.settings import AUDIENCE
from tests.support.audit_push_client import RelayClient
from tests.support.issuers import LocalIssuer
from yovision_platform.security import KeyRing, SigningKey, VerifiedRequest
from yovision_platform.web import create_app, use_access_token_verifier

KEY_ID = "relay-unit-1"


@dataclass
class ManualClock:
    """The fakes' database clock: seconds that move only when a test moves them."""

    now: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Fakes:
    uow: MemoryBellUnitOfWork
    clock: ManualClock
    registry: CollectorRegistry
    metrics: BellMetrics

    def metric(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value

    def use_cases(self) -> BellUseCases:
        return bootstrap(uow=self.uow.factory(), audit_reader=self.uow.reader(), metrics=self.metrics)

    async def stored(self) -> list[StoredAuditEvent]:
        """The committed audit trail, oldest first."""
        return list(reversed(await self.uow.reader().page(AuditFilter(), 1000, None)))


@pytest.fixture
def fakes() -> Fakes:
    clock = ManualClock()
    registry = CollectorRegistry()
    return Fakes(MemoryBellUnitOfWork(clock), clock, registry, BellMetrics.create(registry))


def verified(body: bytes, *, nonce: str | None = None, request: bytes | None = None) -> VerifiedRequest:
    """A request as `verify_request` returns it: the request digest covers the body (or `request`, to make
    another request with the same nonce)."""
    body_digest = hashlib.sha256(body).hexdigest()
    request_digest = hashlib.sha256(request if request is not None else body).hexdigest()
    return VerifiedRequest(
        KEY_ID, int(time.time()), nonce or secrets.token_hex(16), body_digest, request_digest
    )


@dataclass
class Api:
    http: httpx.AsyncClient
    relay: RelayClient
    fakes: Fakes
    issuer: LocalIssuer

    def auth(self, subject: str, *permissions: str) -> dict[str, str]:
        """A user's access token for Bell, from the in-process issuer."""
        return {"authorization": f"Bearer {self.issuer.token(subject, *permissions, audience=AUDIENCE)}"}


@pytest.fixture(scope="session")
def issuer() -> LocalIssuer:
    return LocalIssuer()


@pytest.fixture
async def api(fakes: Fakes, issuer: LocalIssuer) -> AsyncIterator[Api]:
    """The real app (routes, guards, problem handlers) on the fakes, called in process over ASGI; access
    tokens from an in-process issuer (`LocalIssuer`)."""
    verifier = issuer.verifier(AUDIENCE)
    key = SigningKey(KEY_ID, secrets.token_bytes(32))
    app = create_app("bell-receiver", "test")
    use_access_token_verifier(app, verifier)
    mount_api(app, use_cases=fakes.use_cases(), checks=BatchChecks(KeyRing([key]), fakes.metrics))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bell.test") as http:
        yield Api(http, RelayClient(http, KeyRing([key], active_key_id=KEY_ID)), fakes, issuer)
    await verifier.keys.aclose()
    await verifier.keys.http.aclose()
