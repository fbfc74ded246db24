"""orphan-scanner's use cases on the in-memory fakes of their ports (proven equal to the real adapters by
`tests/ports/orphan_scanner/`): the use cases built by `bootstrap`, as `entrypoints.main.build` builds them,
over one fake database, fake MediaMTX servers, a fake projection progress and a fake apply lock.

`World.stale` / `World.live` feed the projection use case the Sense events (Avro-encoded, decoded) of a
device that owned a path and is now disabled / is enabled.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry

from orphan_scanner.adapters.memory import (
    MemoryApplyLock,
    MemoryMediaMtxPaths,
    MemoryOrphanUnitOfWork,
    MemoryProjectionProgress,
    MemoryReportReader,
    StoredApplyRun,
)
from orphan_scanner.bootstrap import OrphanUseCases, bootstrap
from orphan_scanner.domain import limits
from orphan_scanner.domain.classify import ServerPath
from orphan_scanner.domain.inputs import confirmation_text
from orphan_scanner.domain.records import COUNTED_OUTCOMES
from orphan_scanner.service_layer.apply import ApplyResult
from orphan_scanner.service_layer.events import OrphanEvents
from orphan_scanner.service_layer.metrics import OrphanMetrics, ScanTrigger
from orphan_scanner.service_layer.scanner import Scanner, ScanReport
from yovision_platform.mediamtx import SINGLE_MEDIA_SERVER_ID, MediaFleet
from yovision_platform.messaging import AvroSerde, EventRecord, InboundEvent, SchemaRegistry, build_event

SERDE = AvroSerde(SchemaRegistry.load())
LEASE_SECONDS = 30.0
DEADLINE_SECONDS = 5.0
CATCH_UP_TIMEOUT_SECONDS = 0.05


@dataclass(frozen=True)
class Options:
    """The settings `bootstrap` reads (`UseCaseSettings`)."""

    instance_id: str = "cli-1"
    scan_lease_seconds: float = LEASE_SECONDS
    scan_interval_seconds: float = limits.SCAN_INTERVAL_SECONDS_DEFAULT
    report_retention_hours: int = limits.REPORT_RETENTION_HOURS_DEFAULT
    catch_up_timeout_seconds: float = CATCH_UP_TIMEOUT_SECONDS
    projection_enabled: bool = True


class SenseEvents:
    """Sense-shaped device and ownership events, built with Sense's catalogue contracts, and the two
    scenarios the tests need (`stale`, `live`); a subclass delivers each event (`deliver`): to Kafka in the
    integration tests, straight to the projection use case here."""

    serde: AvroSerde = SERDE

    def __init__(self) -> None:
        self._versions: dict[uuid.UUID, int] = {}

    async def deliver(self, event: EventRecord) -> None:
        raise NotImplementedError

    async def device(
        self,
        device_id: uuid.UUID,
        path_name: str,
        desired_state: str,
        *,
        event_type: str | None = None,
        server: str | None = None,
    ) -> None:
        """A device event; `server` None is an event from before several servers (no server id)."""
        version = self._versions[device_id] = self._versions.get(device_id, 0) + 1
        payload: dict[str, object] = {
            "device_id": str(device_id),
            "tenant_id": "tenant-a",
            "site_id": "site-1",
            "name": f"camera {path_name}",
            "path_name": path_name,
            "media_server_id": server,
            "desired_state": desired_state,
            "config_version": version,
        }
        kind = event_type or ("DeviceRegistered" if version == 1 else "DeviceDesiredStateChanged")
        if kind == "DeviceDesiredStateChanged":
            payload["previous_desired_state"] = "disabled" if desired_state == "enabled" else "enabled"
        await self.deliver(build_event(self.serde, kind, str(device_id), payload, "sense"))

    async def ownership(self, path_name: str, device_id: uuid.UUID, *, server: str | None = None) -> None:
        """Ownership evidence; `server` None is evidence from before several servers (id `default`)."""
        now = datetime.now(UTC)
        payload = {
            "path_name": path_name,
            "media_server_id": server,
            "device_id": str(device_id),
            "tenant_id": "tenant-a",
            "site_id": "site-1",
            "first_seen_at": now,
            "last_seen_at": now,
        }
        await self.deliver(build_event(self.serde, "PathOwnershipRecorded", path_name, payload, "sense"))

    async def stale(self, path_name: str, *, server: str | None = None) -> uuid.UUID:
        """A path Sense owned for a device that is now disabled."""
        device_id = uuid.uuid4()
        await self.device(device_id, path_name, "enabled", server=server)
        await self.ownership(path_name, device_id, server=server)
        await self.device(device_id, path_name, "disabled", server=server)
        return device_id

    async def live(self, path_name: str, *, server: str | None = None) -> uuid.UUID:
        """A path of an enabled device that Sense configured."""
        device_id = uuid.uuid4()
        await self.device(device_id, path_name, "enabled", server=server)
        await self.ownership(path_name, device_id, server=server)
        return device_id


@dataclass
class World(SenseEvents):
    servers: dict[str, MemoryMediaMtxPaths]
    db: MemoryOrphanUnitOfWork = field(default_factory=MemoryOrphanUnitOfWork)
    progress: MemoryProjectionProgress = field(default_factory=MemoryProjectionProgress)
    lock: MemoryApplyLock = field(default_factory=MemoryApplyLock)
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        super().__init__()
        # the platform's fleet (the `PathFleet` adapter) over fake servers
        self.fleet: MediaFleet[Any] = MediaFleet(self.servers)
        self.metrics = OrphanMetrics(self.registry, self.fleet.ids)
        self.use_cases = self.bootstrap(Options())
        self.scanner = self.new_scanner("scanner-1")
        self.apply = self.use_cases.applier
        self.projection = self.use_cases.projector

    def uow(self) -> MemoryOrphanUnitOfWork:
        return self.db

    def bootstrap(self, options: Options) -> OrphanUseCases:
        """The use cases of one instance over this world's fakes."""
        return bootstrap(
            options,
            uow=self.uow,
            apply_lock=self.lock,
            fleet=self.fleet,
            progress=self.progress,
            report_reader=MemoryReportReader(self.db.reports),
            events=OrphanEvents(SERDE),
            metrics=self.metrics,
        )

    def new_scanner(
        self,
        owner: str,
        *,
        lease_seconds: float = LEASE_SECONDS,
        interval_seconds: float = limits.SCAN_INTERVAL_SECONDS_DEFAULT,
        retention_hours: int = limits.REPORT_RETENTION_HOURS_DEFAULT,
    ) -> Scanner:
        """Another instance's scanner over the same database and servers."""
        options = replace(
            Options(),
            instance_id=owner,
            scan_lease_seconds=lease_seconds,
            scan_interval_seconds=interval_seconds,
            report_retention_hours=retention_hours,
        )
        return self.bootstrap(options).scanner

    @property
    def mediamtx(self) -> MemoryMediaMtxPaths:
        """The single server (id `default`)."""
        return self.servers[SINGLE_MEDIA_SERVER_ID]

    async def deliver(self, event: EventRecord) -> None:
        """What the projection consumer does with a Sense event, without Kafka: decode, apply."""
        record = SERDE.decode(event.value).record
        inbound = InboundEvent(
            event.source_system, event.event_id, event.event_type, record, b"", event.topic, 0, 0, None
        )
        await self.projection.apply(self.db, inbound)

    # --- the operator's commands ------------------------------------------------------------------------

    async def report(self) -> ScanReport:
        report = await self.scanner.scan(ScanTrigger.MANUAL)
        assert report is not None
        return report

    async def apply_report(self, report: ScanReport, *, actor: str = "operator-1") -> ApplyResult:
        return await self.apply.apply(
            report.scan_id,
            actor=actor,
            confirmation=confirmation_text(report.scan_id, len(report.classification.owned_stale)),
        )

    # --- what committed ---------------------------------------------------------------------------------

    def events(self, event_type: str | None = None) -> list[dict[str, Any]]:
        """The committed events' records, in order (of one type)."""
        return [
            dict(SERDE.decode(m.value).record)
            for m in self.db.outbox.committed
            if event_type is None or m.event_type == event_type
        ]

    def event_types(self) -> list[str]:
        return self.db.outbox.event_types()

    def runs(self) -> list[dict[str, Any]]:
        return [run_row(stored) for stored in self.db.reports.runs.values()]


def run_row(stored: StoredApplyRun) -> dict[str, Any]:
    """An apply run as its `apply_runs` row reads (`counts`: the four outcome columns)."""
    run, end = stored.run, stored.end
    return {
        "scan_id": run.scan_id,
        "actor": run.actor,
        "instance_id": run.instance_id,
        "report_candidates": run.report_candidates,
        "status": end.status,
        "reason_code": end.reason_code,
        "current_total": end.current_total,
        "current_candidates": end.current_candidates,
        "blocked_media_server_id": end.blocked_media_server_id,
        "counts": {str(outcome): end.counts.get(outcome, 0) for outcome in COUNTED_OUTCOMES},
    }


def world(*servers: str, paths: Iterable[str] = ()) -> World:
    """One server `default` holding `paths`, or the named servers (empty)."""
    if not servers:
        return World({SINGLE_MEDIA_SERVER_ID: MemoryMediaMtxPaths(paths, deadline_seconds=DEADLINE_SECONDS)})
    return World({s: MemoryMediaMtxPaths(deadline_seconds=DEADLINE_SECONDS) for s in servers})


def on(server: str, name: str) -> ServerPath:
    return ServerPath(server, name)


def names(paths: Iterable[ServerPath], server: str = SINGLE_MEDIA_SERVER_ID) -> set[str]:
    """The path names of `paths`, all of which must be on `server`."""
    listed = list(paths)
    assert {p.media_server_id for p in listed} <= {server}, listed
    return {p.path_name for p in listed}
