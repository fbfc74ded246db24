"""The console's port contracts (`contracts.py`) on the fakes of `console.adapters.memory`. The same suites
run on the real adapters against the real services in `tests/e2e/test_console_ports.py`."""

from __future__ import annotations

from typing import Any

import pytest

from console.adapters.memory import (
    MemoryBellReceiver,
    MemoryHealth,
    MemoryMediaWorker,
    MemoryOrphanScanner,
    MemorySenseReconciler,
    MemorySignalWatcher,
    MemoryTraceStore,
)
from console.domain.identity import PERMISSIONS, User
from console.service_layer.ports import Readiness
from tests.support.console_contracts import (
    BellReceiverPortContract,
    DeviceBody,
    HealthPortContract,
    MediaWorkerPortContract,
    OrphanScannerPortContract,
    SenseReconcilerPortContract,
    SignalWatcherPortContract,
    TraceStoreContract,
)

FIGURES_PAGE = "# TYPE outbox_relay_backlog gauge\noutbox_relay_backlog 0.0\n"


class MemoryUser:
    @pytest.fixture
    def user(self) -> User:
        return User("operator", frozenset(PERMISSIONS), "token")


def fake_device_body(tenant: str, site: str, path: str) -> dict[str, Any]:
    return {
        "tenant_id": tenant, "site_id": site, "name": f"camera {path}", "path_name": path,
        "source_uri": "rtsp://10.0.0.1:554/stream", "desired_state": "disabled",
    }  # fmt: skip


class TestMemorySenseReconciler(MemoryUser, SenseReconcilerPortContract):
    @pytest.fixture
    def port(self) -> MemorySenseReconciler:
        return MemorySenseReconciler()

    @pytest.fixture
    def device_body(self) -> DeviceBody:
        return fake_device_body


class TestMemoryOrphanScanner(MemoryUser, OrphanScannerPortContract):
    @pytest.fixture
    def port(self) -> MemoryOrphanScanner:
        return MemoryOrphanScanner()


class TestMemoryBellReceiver(MemoryUser, BellReceiverPortContract):
    @pytest.fixture
    def port(self) -> MemoryBellReceiver:
        return MemoryBellReceiver()


class TestMemorySignalWatcher(MemoryUser, SignalWatcherPortContract):
    @pytest.fixture
    def port(self) -> MemorySignalWatcher:
        return MemorySignalWatcher()

    @pytest.fixture
    def watcher_body(self) -> dict[str, Any]:
        return {
            "name": "price watch", "agent_id": "agent", "url": "http://127.0.0.1:9/price", "method": "GET",
            "headers": [], "interval_minutes": 60, "compare_mode": "HASH", "prompt_template": "{diff}",
        }  # fmt: skip


class TestMemoryMediaWorker(MemoryUser, MediaWorkerPortContract):
    @pytest.fixture
    def port(self) -> MemoryMediaWorker:
        return MemoryMediaWorker()


class TestMemoryHealth(HealthPortContract):
    @pytest.fixture
    def port(self) -> MemoryHealth:
        return MemoryHealth(
            ready={"sense-reconciler": Readiness(200, {"database": "ok"})},
            pages={"sense-reconciler": FIGURES_PAGE},
        )

    @pytest.fixture
    def ready_service(self) -> str:
        return "sense-reconciler"

    @pytest.fixture
    def silent_service(self) -> str:
        return "media-worker"


class TestMemoryTraceStore(TraceStoreContract):
    @pytest.fixture
    def port(self) -> MemoryTraceStore:
        return MemoryTraceStore()
