"""orphan-scanner's use cases on the in-memory fakes of their ports (proven equal to the real adapters by
`tests/ports/orphan_scanner/`): the scanner and the apply built as `entrypoints.main.build` builds them,
over one fake database, fake MediaMTX servers, a fake projection progress and a fake apply lock.

`World.stale` / `World.live` put into the projection what Sense's events would (a device that owned a path
and is now disabled / is enabled), through the projection store port.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry

from orphan_scanner.adapters.memory import (
    InMemoryApplyLock,
    InMemoryMediaMtx,
    InMemoryOrphanUnitOfWork,
    InMemoryProjectionProgress,
    StoredApplyRun,
)
from orphan_scanner.domain.classify import ServerPath
from orphan_scanner.domain.inputs import confirmation_text
from orphan_scanner.domain.records import COUNTED_OUTCOMES, DeviceClaim, OwnershipEvidence
from orphan_scanner.service_layer.apply import ApplyResult, ApplyService
from orphan_scanner.service_layer.events import OrphanEvents
from orphan_scanner.service_layer.metrics import OrphanMetrics, ScanTrigger
from orphan_scanner.service_layer.scanner import Scanner, ScanReport
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.media_servers import SINGLE_MEDIA_SERVER_ID, MediaFleet

SERDE = AvroSerde(SchemaRegistry.load())
LEASE_SECONDS = 30.0
DEADLINE_SECONDS = 5.0
CATCH_UP_TIMEOUT_SECONDS = 0.05


@dataclass
class World:
    servers: dict[str, InMemoryMediaMtx]
    db: InMemoryOrphanUnitOfWork = field(default_factory=InMemoryOrphanUnitOfWork)
    progress: InMemoryProjectionProgress = field(default_factory=InMemoryProjectionProgress)
    lock: InMemoryApplyLock = field(default_factory=InMemoryApplyLock)
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    _versions: dict[uuid.UUID, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # the platform's fleet (the `MediaServers` adapter) over fake servers
        self.fleet: MediaFleet[Any] = MediaFleet(self.servers)
        self.metrics = OrphanMetrics(self.registry, self.fleet.ids)
        self.scanner = self.new_scanner("scanner-1")
        self.apply = ApplyService(
            self.uow,
            self.lock,
            OrphanEvents(SERDE),
            self.fleet,
            self.progress,
            instance_id="cli-1",
            catch_up_timeout_seconds=CATCH_UP_TIMEOUT_SECONDS,
        )

    def uow(self) -> InMemoryOrphanUnitOfWork:
        return self.db

    def new_scanner(self, owner: str, **options: Any) -> Scanner:
        """Another instance's scanner over the same database and servers."""
        return Scanner(
            self.uow,
            OrphanEvents(SERDE),
            self.fleet,
            self.metrics,
            owner=owner,
            lease_seconds=options.pop("lease_seconds", LEASE_SECONDS),
            **options,
        )

    @property
    def mediamtx(self) -> InMemoryMediaMtx:
        """The single server (id `default`)."""
        return self.servers[SINGLE_MEDIA_SERVER_ID]

    # --- what Sense's events put into the projection -----------------------------------------------------

    async def device(
        self, device_id: uuid.UUID, path_name: str, desired_state: str, *, server: str | None = None
    ) -> None:
        version = self._versions.get(device_id, 0) + 1
        self._versions[device_id] = version
        claim = DeviceClaim(
            device_id=device_id,
            tenant_id="tenant-a",
            site_id="site-1",
            path_name=path_name,
            media_server_id=server,
            desired_state=desired_state,
            config_version=version,
            event_id=uuid.uuid4(),
            occurred_at=datetime.now(UTC),
        )
        async with self.db as uow:
            await uow.projection.apply_claim(claim)

    async def ownership(self, path_name: str, device_id: uuid.UUID, *, server: str | None = None) -> None:
        now = datetime.now(UTC)
        evidence = OwnershipEvidence(
            path_name=path_name,
            media_server_id=server or SINGLE_MEDIA_SERVER_ID,
            device_id=device_id,
            tenant_id="tenant-a",
            site_id="site-1",
            first_seen_at=now,
            last_seen_at=now,
        )
        async with self.db as uow:
            await uow.projection.record_ownership(evidence)

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
        return World({SINGLE_MEDIA_SERVER_ID: InMemoryMediaMtx(paths, deadline_seconds=DEADLINE_SECONDS)})
    return World({s: InMemoryMediaMtx(deadline_seconds=DEADLINE_SECONDS) for s in servers})


def on(server: str, name: str) -> ServerPath:
    return ServerPath(server, name)


def names(paths: Iterable[ServerPath], server: str = SINGLE_MEDIA_SERVER_ID) -> set[str]:
    """The path names of `paths`, all of which must be on `server`."""
    listed = list(paths)
    assert {p.media_server_id for p in listed} <= {server}, listed
    return {p.path_name for p in listed}
