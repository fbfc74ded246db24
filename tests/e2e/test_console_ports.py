"""The real half of the console's port contracts (`tests/support/console_contracts.py`): the real adapters of
`console.adapters` against the five services of the session's e2e environment, acting as a user with the
console's operator permissions (one access token of the environment's Hydra for the five audiences, as the
console's sign-in gets), and against the environment's Jaeger. Nothing here starts a process. The fakes
pass the same suites in `tests/ports/console/test_memory.py`.

Read-mostly: the writes are the console's own (a device created, renamed, enabled and disabled, a site
limit; a watcher created and paused)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from console.adapters.apis import (
    Apis,
    BellReceiverApi,
    MediaWorkerApi,
    OrphanScannerApi,
    SenseReconcilerApi,
    ServiceHealthApi,
    SignalWatcherApi,
)
from console.adapters.jaeger import JaegerQuery
from console.domain.identity import PERMISSIONS, User
from tests.e2e.test_watchers import Target, price_watcher, target
from tests.support import console_contracts as contracts
from tests.support.e2e_fixtures import Witness, camera_source, device_body
from tests.support.stack import free_port
from yovision_platform.tools.devtoken import user_access_token
from yovision_platform.tools.environment import LocalEnvironment
from yovision_platform.tools.jaeger import PrivateJaeger

__all__ = ["target"]

SERVICES = ("sense-reconciler", "orphan-scanner", "bell-receiver", "signal-watcher", "media-worker")
SILENT = "silent"  # a service name the adapters know, at a closed port


@pytest.fixture
async def apis(env: LocalEnvironment) -> AsyncIterator[Apis]:
    urls = {name: env.url(name) for name in SERVICES}
    client = Apis(urls={**urls, SILENT: f"http://127.0.0.1:{free_port()}"})
    yield client
    await client.aclose()


@pytest.fixture
async def operator_user(env: LocalEnvironment, witness: Witness) -> User:
    """A user with every operator permission, whose one token is for the five services (the console's)."""
    subject = f"ports-{uuid.uuid4().hex[:6]}"
    token = await user_access_token(env.root, subject, PERMISSIONS, SERVICES)
    witness.secrets.add(token)
    return User(subject, frozenset(PERMISSIONS), token)


class RealUser:
    @pytest.fixture
    def user(self, operator_user: User) -> User:
        return operator_user


class TestApiSenseReconciler(RealUser, contracts.SenseReconcilerPortContract):
    @pytest.fixture
    def port(self, apis: Apis) -> SenseReconcilerApi:
        return SenseReconcilerApi(apis)

    @pytest.fixture
    def device_body(self, witness: Witness) -> contracts.DeviceBody:
        def body(tenant: str, site: str, path: str) -> dict[str, Any]:
            return device_body(tenant, site, path, camera_source(witness, "10.28.0.1"), "disabled")

        return body


class TestApiOrphanScanner(RealUser, contracts.OrphanScannerPortContract):
    @pytest.fixture
    def port(self, apis: Apis) -> OrphanScannerApi:
        return OrphanScannerApi(apis)


class TestApiBellReceiver(RealUser, contracts.BellReceiverPortContract):
    @pytest.fixture
    def port(self, apis: Apis) -> BellReceiverApi:
        return BellReceiverApi(apis)


class TestApiSignalWatcher(RealUser, contracts.SignalWatcherPortContract):
    @pytest.fixture
    def port(self, apis: Apis) -> SignalWatcherApi:
        return SignalWatcherApi(apis)

    @pytest.fixture
    def watcher_body(self, target: Target) -> dict[str, Any]:
        target.answer_price(100)
        return price_watcher("ports watch", "agent-ports", target.url)


class TestApiMediaWorker(RealUser, contracts.MediaWorkerPortContract):
    @pytest.fixture
    def port(self, apis: Apis) -> MediaWorkerApi:
        return MediaWorkerApi(apis)


class TestApiHealth(contracts.HealthPortContract):
    @pytest.fixture
    def port(self, apis: Apis) -> ServiceHealthApi:
        return ServiceHealthApi(apis)

    @pytest.fixture
    def ready_service(self) -> str:
        return "sense-reconciler"

    @pytest.fixture
    def silent_service(self) -> str:
        return SILENT


class TestJaegerTraceStore(contracts.TraceStoreContract):
    @pytest.fixture
    async def port(self, jaeger: PrivateJaeger) -> AsyncIterator[JaegerQuery]:
        store = JaegerQuery(jaeger.query_url)
        yield store
        await store.aclose()
