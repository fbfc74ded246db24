"""The read-only scan: a singleton under a DB lease with a fencing token.

One scan: claim the `scanner` lease (periodic: only when `next_scan_at` is due; manual: whenever the lease
is free) -> enumerate every registered MediaMTX server, concurrently (each server's pages under one
deadline shorter than the lease) -> in ONE transaction: fenced update of the lease (still ours? then it is
locked until commit and released by it), read the projection, classify every (server, path), insert the
report, its findings, its per-server counts and the ScanReported event. A lost lease rolls all of it back:
no usable report. A failed enumeration of any server records a `failed` report (its stable code), which
apply refuses: a report that silently missed a server would misstate the fleet. Never deletes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime

from orphan_scanner.domain import limits
from orphan_scanner.domain.classify import Classification, PathClass, ServerPath, classify
from orphan_scanner.domain.errors import ScanFailed, ScanLeaseBusy
from orphan_scanner.domain.records import NewReport
from orphan_scanner.service_layer.events import OrphanEvents
from orphan_scanner.service_layer.metrics import OrphanMetrics, ScanResult, ScanTrigger
from orphan_scanner.service_layer.ports import OrphanUnitOfWork, PathFleet, UnitOfWorkFactory
from yovision_platform.errors import LeaseLost
from yovision_platform.mediamtx import MediaMtxError
from yovision_platform.storage import Lease

log = logging.getLogger(__name__)

MANUAL_SCAN_POLL_SECONDS = 0.5


async def enumerate_fleet(fleet: PathFleet, servers: tuple[str, ...]) -> list[ServerPath]:
    """Every configured path of `servers`, enumerated concurrently (each under its client's deadline).
    Raises the first server's MediaMtxError (in server order) when any enumeration failed."""
    results = await asyncio.gather(
        *(fleet.client(server).list_path_names() for server in servers), return_exceptions=True
    )
    paths: list[ServerPath] = []
    for server, result in zip(servers, results, strict=True):
        if isinstance(result, BaseException):
            raise result
        paths += [ServerPath(server, name) for name in result]
    return paths


@dataclass(frozen=True)
class ScanReport:
    scan_id: uuid.UUID
    created_at: datetime
    expires_at: datetime
    classification: Classification
    media_servers: tuple[str, ...] = ()


class Scanner:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        events: OrphanEvents,
        mediamtx: PathFleet,
        metrics: OrphanMetrics | None,
        *,
        owner: str,
        lease_seconds: float = limits.SCAN_LEASE_SECONDS_DEFAULT,
        interval_seconds: float = limits.SCAN_INTERVAL_SECONDS_DEFAULT,
        retention_hours: int = limits.REPORT_RETENTION_HOURS_DEFAULT,
    ) -> None:
        if mediamtx.deadline_seconds >= lease_seconds:
            raise ValueError("the MediaMTX deadline must be strictly shorter than the scan lease")
        self._uow = uow
        self._events = events
        self._mediamtx = mediamtx
        self._metrics = metrics
        self._owner = owner
        self._lease_seconds = lease_seconds
        self._interval = interval_seconds
        self._retention_hours = retention_hours

    @property
    def interval_seconds(self) -> float:
        """How long after a scan the next periodic one is due."""
        return self._interval

    async def scan(self, trigger: ScanTrigger) -> ScanReport | None:
        """Periodic: None when no scan is due or another instance holds the lease. Manual: waits for a
        held lease up to lease + deadline, then raises ScanLeaseBusy. A scan that fails raises ScanFailed."""
        lease = await self._claim(trigger)
        if lease is None:
            return None
        started = time.monotonic()
        try:
            report = await self._scan_under(lease, trigger)
        finally:
            if self._metrics is not None:
                self._metrics.scan_seconds.labels().observe(time.monotonic() - started)
        if trigger is ScanTrigger.PERIODIC:
            async with self._uow() as uow:
                await uow.reports.prune(older_than_hours=self._retention_hours)
        return report

    async def _claim(self, trigger: ScanTrigger) -> Lease | None:
        deadline = time.monotonic() + self._lease_seconds + self._mediamtx.deadline_seconds
        while True:
            async with self._uow() as uow:
                lease = await uow.scan_lease.claim(
                    self._owner, lease_seconds=self._lease_seconds, due_only=trigger is ScanTrigger.PERIODIC
                )
            if lease is not None or trigger is ScanTrigger.PERIODIC:
                return lease
            if time.monotonic() >= deadline:
                raise ScanLeaseBusy()
            await asyncio.sleep(MANUAL_SCAN_POLL_SECONDS)

    async def _scan_under(self, lease: Lease, trigger: ScanTrigger) -> ScanReport:
        scan_id = uuid.uuid4()
        try:
            # Each client bounds its whole enumeration by its deadline, which is shorter than the lease.
            names = await enumerate_fleet(self._mediamtx, self._mediamtx.ids)
        except MediaMtxError as exc:
            await self._record_failure(lease, scan_id, trigger, exc.code)
            raise ScanFailed.enumeration(exc.code) from None
        try:
            async with self._uow() as uow:
                created_at, expires_at, classification = await self._write_report(
                    uow, lease, scan_id, names, trigger
                )
        except LeaseLost:
            self._count(trigger, ScanResult.LEASE_LOST)
            log.warning("scan lease lost; report discarded", extra={"error_code": "lease_lost"})
            raise ScanFailed.lease_lost() from None
        self._count(trigger, ScanResult.COMPLETE)
        if self._metrics is not None:
            by_server = classification.counts_by_server(self._mediamtx.ids)
            self._metrics.set_last_scan(
                {
                    server: {"observed": sum(tally.values()), **{str(k): v for k, v in tally.items()}}
                    for server, tally in by_server.items()
                }
            )
        log.info(
            "scan complete",
            extra={
                "scan_id": str(scan_id),
                "observed": classification.observed_total,
                "owned_stale": len(classification.owned_stale),
                "unowned": len(classification.unowned),
            },
        )
        return ScanReport(scan_id, created_at, expires_at, classification, self._mediamtx.ids)

    async def _write_report(
        self,
        uow: OrphanUnitOfWork,
        lease: Lease,
        scan_id: uuid.UUID,
        names: list[ServerPath],
        trigger: ScanTrigger,
    ) -> tuple[datetime, datetime, Classification]:
        # First: a lost lease (LeaseLost) writes nothing; a current one stays ours until this commits.
        await uow.scan_lease.release(lease, next_scan_in_seconds=self._interval)
        claimed = await uow.projection.claimed_paths(names)
        owners = await uow.projection.last_owners(names)
        classification = classify(names, claimed, owners)
        created_at, expires_at = await uow.reports.insert_complete(
            self._new_report(scan_id, trigger, lease), classification, self._mediamtx.ids
        )
        counts = classification.counts()
        message = self._events.message(
            "ScanReported",
            scan_id,
            {
                "instance_id": self._owner,
                "expires_at": expires_at,
                "observed_total": classification.observed_total,
                "in_use_count": counts[PathClass.IN_USE],
                "owned_stale_count": len(classification.owned_stale),
                "unowned_count": len(classification.unowned),
                "owned_stale_path_names": [path.path_name for path in classification.owned_stale],
                "owned_stale_media_server_ids": [path.media_server_id for path in classification.owned_stale],
            },
        )
        await uow.outbox.enqueue(message)
        return created_at, expires_at, classification

    async def _record_failure(
        self, lease: Lease, scan_id: uuid.UUID, trigger: ScanTrigger, code: str
    ) -> None:
        self._count(trigger, ScanResult.FAILED)
        log.warning("scan failed: MediaMTX enumeration", extra={"error_code": code})
        with contextlib.suppress(LeaseLost):
            async with self._uow() as uow:
                await uow.scan_lease.release(lease, next_scan_in_seconds=self._interval)
                await uow.reports.insert_failed(self._new_report(scan_id, trigger, lease), code)

    def _new_report(self, scan_id: uuid.UUID, trigger: ScanTrigger, lease: Lease) -> NewReport:
        return NewReport(scan_id, trigger.value, self._owner, lease.token)

    def _count(self, trigger: ScanTrigger, result: ScanResult) -> None:
        if self._metrics is not None:
            self._metrics.scans.labels(trigger=trigger, result=result).inc()
