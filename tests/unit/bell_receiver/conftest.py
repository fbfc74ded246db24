"""bell-receiver's use cases and HTTP API on the in-memory fakes (adapters/memory.py), in milliseconds.

The fakes are proven equal to the PostgreSQL adapters by tests/ports/bell_receiver; what needs PostgreSQL
itself (SQL rules, locks under concurrency), Kafka, a real server or a process stays in
tests/integration/bell_receiver.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest
from prometheus_client import CollectorRegistry

from bell_receiver.adapters.memory import InMemoryBellUnitOfWork
from bell_receiver.entrypoints.api import UseCases, install_api
from bell_receiver.service_layer.audit_batch_receiver import AuditBatchReceiver
from bell_receiver.service_layer.audit_events import AuditEvents
from bell_receiver.service_layer.metrics import BellMetrics
from bell_receiver.service_layer.notifications import Notifications
from bell_receiver.settings import JWT_AUDIENCE
from yovision_platform.auth import TokenVerifier
from yovision_platform.signing import KeyRing, SigningKey, VerifiedRequest
from yovision_platform.web import create_app

KEY_ID = "relay-unit-1"
JWT_ISSUER = "yovision-test"


@dataclass
class ManualClock:
    """The fakes' database clock: seconds that move only when a test moves them."""

    now: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Fakes:
    uow: InMemoryBellUnitOfWork
    clock: ManualClock
    registry: CollectorRegistry
    metrics: BellMetrics

    def metric(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value

    def use_cases(self) -> UseCases:
        factory = self.uow.factory()
        return UseCases(
            audit_batches=AuditBatchReceiver(factory, self.metrics),
            notifications=Notifications(factory),
            audit_events=AuditEvents(self.uow.reader()),
        )


@pytest.fixture
def fakes() -> Fakes:
    clock = ManualClock()
    registry = CollectorRegistry()
    return Fakes(InMemoryBellUnitOfWork(clock), clock, registry, BellMetrics.create(registry))


def verified(body: bytes, *, nonce: str | None = None, key_id: str = KEY_ID) -> VerifiedRequest:
    """A request as `verify_request` returns it (the digest covers the body; the use case keys receipts by
    (key id, nonce) and compares request digests)."""
    import hashlib

    digest = hashlib.sha256(body).hexdigest()
    return VerifiedRequest(key_id, int(time.time()), nonce or secrets.token_hex(16), digest, digest)


@dataclass
class Api:
    http: httpx.AsyncClient
    fakes: Fakes
    verifier: TokenVerifier

    def auth(self, subject: str, *permissions: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.verifier.mint(subject, permissions)}"}


@pytest.fixture
async def api(fakes: Fakes) -> AsyncIterator[Api]:
    """The real app (routes, guards, problem handlers) on the fakes, called in process."""
    verifier = TokenVerifier(secrets.token_bytes(32), issuer=JWT_ISSUER, audience=JWT_AUDIENCE)
    app = create_app("bell-receiver", "test")
    install_api(
        app,
        use_cases=fakes.use_cases(),
        keyring=KeyRing([SigningKey(KEY_ID, secrets.token_bytes(32))]),
        verifier=verifier,
        metrics=fakes.metrics,
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bell.test") as http:
        yield Api(http, fakes, verifier)


T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def new_id() -> uuid.UUID:
    return uuid.uuid4()
