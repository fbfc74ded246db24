"""The contract suites of the console's ports (`console.service_layer.ports`): one abstract class per port,
written once, run against the fake (`console.adapters.memory`, here in the ports tier: `test_memory.py`)
and against the real adapter driving the real services (`tests/e2e/test_console_ports.py`, in the e2e
environment: the services as processes, the user's token from its OpenID provider).

A subclass supplies `port` (the adapter), `user` (a `User` whose token the services accept, with the
console's operator permissions) and what a test must create through the port (`device_body`,
`watcher_body`). The suites are read-mostly: they write only what the console writes."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from console.domain.identity import User
from console.service_layer.overview import figures_of
from console.service_layer.ports import (
    ApiError,
    BellReceiverPort,
    HealthPort,
    MediaWorkerPort,
    OrphanScannerPort,
    SenseReconcilerPort,
    SignalWatcherPort,
    TraceStore,
)

DeviceBody = Callable[[str, str, str], dict[str, Any]]  # (tenant, site, path) -> a POST /v1/devices body
UNKNOWN = uuid.UUID("00000000-0000-4000-8000-00000000d1e5")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def refused(answer: Any) -> ApiError:
    """The ApiError the awaited call raised."""
    with pytest.raises(ApiError) as caught:
        await answer
    return caught.value


class SenseReconcilerPortContract:
    @pytest.fixture
    def port(self) -> SenseReconcilerPort:
        raise NotImplementedError

    @pytest.fixture
    def user(self) -> User:
        raise NotImplementedError

    @pytest.fixture
    def device_body(self) -> DeviceBody:
        raise NotImplementedError

    async def test_a_created_device_is_read_back_listed_and_has_a_reconcile_status(
        self, port: SenseReconcilerPort, user: User, device_body: DeviceBody
    ) -> None:
        tenant, path = unique("tenant"), unique("path")
        created = await port.create_device(user, device_body(tenant, "site-1", path))
        device_id = uuid.UUID(created["id"])
        device = await port.device(user, device_id)
        assert (device["tenant_id"], device["site_id"], device["path_name"]) == (tenant, "site-1", path)
        assert device["desired_state"] == "disabled"
        page = await port.devices(user, tenant_id=tenant, site_id="site-1", after=None, limit=50)
        assert [d["id"] for d in page["items"]] == [created["id"]] and page["next_after"] is None
        status = await port.reconcile_status(user, device_id)
        assert status["device_id"] == created["id"]
        assert status["status"] in ("pending", "converged", "failed")
        statuses = await port.reconcile_statuses(user, [created["id"]])
        assert [s["device_id"] for s in statuses["items"]] == [created["id"]]

    async def test_the_console_s_changes_are_read_back(
        self, port: SenseReconcilerPort, user: User, device_body: DeviceBody
    ) -> None:
        tenant = unique("tenant")
        created = await port.create_device(user, device_body(tenant, "site-1", unique("path")))
        device_id = uuid.UUID(created["id"])
        await port.change_device(user, device_id, {"name": "renamed"})
        await port.set_desired_states(user, [created["id"]], "enabled")
        assert (await port.device(user, device_id))["desired_state"] == "enabled"
        await port.set_desired_state(user, device_id, "disabled")
        device = await port.device(user, device_id)
        assert (device["name"], device["desired_state"]) == ("renamed", "disabled")
        await port.set_site_limit(user, tenant, "site-1", 7)
        site = await port.site(user, tenant, "site-1")
        assert (site["tenant_id"], site["site_id"], site["max_video_channels"]) == (tenant, "site-1", 7)

    async def test_a_path_name_taken_is_refused_with_its_code(
        self, port: SenseReconcilerPort, user: User, device_body: DeviceBody
    ) -> None:
        path = unique("path")
        await port.create_device(user, device_body(unique("tenant"), "site-1", path))
        refusal = await refused(port.create_device(user, device_body(unique("tenant"), "site-1", path)))
        assert (refusal.service, refusal.status, refusal.code) == ("sense-reconciler", 409, "path_name_taken")

    async def test_an_unknown_device_is_device_not_found(self, port: SenseReconcilerPort, user: User) -> None:
        for read in (port.device(user, UNKNOWN), port.reconcile_status(user, UNKNOWN)):
            refusal = await refused(read)
            assert (refusal.status, refusal.code) == (404, "device_not_found")


class OrphanScannerPortContract:
    @pytest.fixture
    def port(self) -> OrphanScannerPort:
        raise NotImplementedError

    @pytest.fixture
    def user(self) -> User:
        raise NotImplementedError

    async def test_the_latest_report_is_a_report_or_none(self, port: OrphanScannerPort, user: User) -> None:
        report = await port.latest_report(user)
        assert report is None or isinstance(report, dict)


class BellReceiverPortContract:
    @pytest.fixture
    def port(self) -> BellReceiverPort:
        raise NotImplementedError

    @pytest.fixture
    def user(self) -> User:
        raise NotImplementedError

    async def test_the_inbox_is_a_page(self, port: BellReceiverPort, user: User) -> None:
        page = await port.notifications(user, cursor=None)
        assert isinstance(page["items"], list) and "next_cursor" in page

    async def test_the_audit_trail_is_a_page_of_at_most_the_limit(
        self, port: BellReceiverPort, user: User
    ) -> None:
        page = await port.audit_events(user, {"device_id": None}, cursor=None, limit=2)
        assert len(page["items"]) <= 2 and "next_cursor" in page

    async def test_a_time_that_is_no_time_is_refused(self, port: BellReceiverPort, user: User) -> None:
        refusal = await refused(port.audit_events(user, {"occurred_from": "soon"}, cursor=None, limit=2))
        assert refusal.service == "bell-receiver" and refusal.status in (400, 422)

    async def test_marking_an_unknown_notification_is_not_found(
        self, port: BellReceiverPort, user: User
    ) -> None:
        refusal = await refused(port.mark_read(user, 987_654_321, True))
        assert (refusal.status, refusal.code) == (404, "not_found")


class SignalWatcherPortContract:
    @pytest.fixture
    def port(self) -> SignalWatcherPort:
        raise NotImplementedError

    @pytest.fixture
    def user(self) -> User:
        raise NotImplementedError

    @pytest.fixture
    def watcher_body(self) -> dict[str, Any]:
        """A definition signal-watcher accepts (its target answers, on loopback)."""
        raise NotImplementedError

    async def test_a_created_watcher_is_read_back_listed_and_paused(
        self, port: SignalWatcherPort, user: User, watcher_body: dict[str, Any]
    ) -> None:
        created = await port.create_watcher(user, watcher_body)
        watcher_id = uuid.UUID(created["id"])
        watcher = await port.watcher(user, watcher_id)
        assert (watcher["name"], watcher["url"], watcher["status"]) == (
            watcher_body["name"], watcher_body["url"], "ACTIVE",
        )  # fmt: skip
        page = await port.watchers(user, limit=50, cursor=None)
        assert created["id"] in [w["id"] for w in page["items"]]
        checks = await port.checks(user, watcher_id, limit=5, cursor=None)
        assert isinstance(checks["items"], list) and "next_cursor" in checks
        await port.set_status(user, watcher_id, "PAUSED")
        assert (await port.watcher(user, watcher_id))["status"] == "PAUSED"

    async def test_an_unknown_watcher_is_not_found(self, port: SignalWatcherPort, user: User) -> None:
        for call in (port.watcher(user, UNKNOWN), port.set_status(user, UNKNOWN, "PAUSED")):
            refusal = await refused(call)
            assert (refusal.service, refusal.status, refusal.code) == ("signal-watcher", 404, "not_found")


class MediaWorkerPortContract:
    @pytest.fixture
    def port(self) -> MediaWorkerPort:
        raise NotImplementedError

    @pytest.fixture
    def user(self) -> User:
        raise NotImplementedError

    async def test_the_materials_are_a_page(self, port: MediaWorkerPort, user: User) -> None:
        page = await port.materials(user, cursor=None)
        assert isinstance(page["items"], list) and "next_cursor" in page

    async def test_an_unknown_material_is_not_found(self, port: MediaWorkerPort, user: User) -> None:
        for call in (port.material(user, UNKNOWN), port.retry(user, UNKNOWN)):
            refusal = await refused(call)
            assert (refusal.service, refusal.status, refusal.code) == ("media-worker", 404, "not_found")


class HealthPortContract:
    @pytest.fixture
    def port(self) -> HealthPort:
        raise NotImplementedError

    @pytest.fixture
    def ready_service(self) -> str:
        """A service that is ready and exports the platform's figures."""
        raise NotImplementedError

    @pytest.fixture
    def silent_service(self) -> str:
        """A service the port knows that does not answer."""
        raise NotImplementedError

    async def test_a_ready_service_answers_its_readiness_and_figures(
        self, port: HealthPort, ready_service: str
    ) -> None:
        readiness = await port.readiness(ready_service)
        assert readiness is not None and readiness.status == 200
        assert all(isinstance(v, str) for v in readiness.checks.values())
        page = await port.metrics(ready_service)
        assert page is not None and figures_of(page)["outbox_relay_backlog"] is not None

    async def test_a_silent_service_is_none(self, port: HealthPort, silent_service: str) -> None:
        assert await port.readiness(silent_service) is None
        assert await port.metrics(silent_service) is None


class TraceStoreContract:
    @pytest.fixture
    def port(self) -> TraceStore:
        raise NotImplementedError

    async def test_an_unknown_trace_is_none(self, port: TraceStore) -> None:
        assert await port.trace(uuid.uuid4().hex) is None

    async def test_a_search_nothing_matches_is_empty(self, port: TraceStore) -> None:
        assert await port.search("sense-reconciler", {"yovision.device_id": str(uuid.uuid4())}) == []
