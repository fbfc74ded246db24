"""The reconcile loop: one writer per MediaMTX server, each claiming the due rows of that server from the
partitions this instance owns and working them in claim order (service_layer.reconcile_item), a few at a
time so that the database work of one item overlaps the MediaMTX calls of another.

Why one writer per server: MediaMTX applies every config change by itself, one after the other, re-applying
its whole configuration each time; concurrent calls from one process would only queue inside MediaMTX and
lengthen every call, and two writers racing on one server could read each other's half-applied state. So
each server gets exactly one sequential stream of calls from this process (`ServerLanes`), and the servers
of a fleet are worked in parallel. What a writer overlaps is only its own database work (renew and load the
next item, record the previous one's result): the server never waits between two calls on it. Across
instances, the partition ownership keeps every device with one instance.

Besides the writers, a housekeeping loop marks converged devices for re-verification (drift check) and
fails, with the stable code `media_server_not_registered`, rows of servers removed from the settings.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable

from sense_reconciler.domain import limits
from sense_reconciler.domain.reconcile import ClaimedItem
from sense_reconciler.service_layer.metrics import (
    UNREGISTERED_SERVER_LABEL,
    ItemResult,
    ReconcileMetrics,
    RunResult,
)
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.ports import MediaServers, UnitOfWorkFactory
from sense_reconciler.service_layer.reconcile_item import NOT_REGISTERED, ItemReconciler, ServerLanes
from sense_reconciler.service_layer.source_uris import SourceUris
from yovision_platform.avro import AvroSerde
from yovision_platform.backoff import wait_for_stop
from yovision_platform.db import STORE_ERRORS
from yovision_platform.errors import ConfigError, LeaseLost

log = logging.getLogger(__name__)
# How often per drift interval the loop looks for converged devices to re-verify.
DRIFT_MARKS_PER_INTERVAL = 10
# While a writer keeps claiming, its server's unconverged/refused gauges are counted at most this often.
GAUGE_REFRESH_SECONDS = 1.0


class Reconciler:
    def __init__(
        self,
        units: UnitOfWorkFactory,
        fleet: MediaServers,
        owned: OwnedPartitions,
        metrics: ReconcileMetrics,
        serde: AvroSerde,
        *,
        owner: str,
        sources: SourceUris,
        lease_seconds: float = limits.LEASE_SECONDS_DEFAULT,
        batch: int = limits.CLAIM_BATCH_DEFAULT_ITEMS,
        scan_interval_seconds: float = limits.SCAN_INTERVAL_SECONDS_DEFAULT,
        ownership_topic: str | None = None,
        drift_check_seconds: float = limits.DRIFT_CHECK_SECONDS_DEFAULT,
    ) -> None:
        if fleet.deadline_seconds >= lease_seconds:
            raise ConfigError(
                "SENSE_OPERATION_DEADLINE_SECONDS", "not_below_lease", "deadline must be < lease"
            )
        if not 1 <= batch <= limits.CLAIM_BATCH_MAX_ITEMS:
            raise ConfigError(
                "SENSE_CLAIM_BATCH", "out_of_range", f"must be 1..{limits.CLAIM_BATCH_MAX_ITEMS}"
            )
        self._units = units
        self._fleet = fleet
        self._owned = owned
        self._metrics = metrics
        self._items = ItemReconciler(
            units,
            fleet,
            ServerLanes(fleet.ids),
            sources,
            serde,
            lease_seconds=lease_seconds,
            ownership_topic=ownership_topic,
        )
        self._owner = owner
        self._lease_seconds = lease_seconds
        self._batch = batch
        self._scan_interval = scan_interval_seconds
        # 0: off. Else converged devices are re-verified against MediaMTX once their last result is older.
        self._drift_check = drift_check_seconds
        self._next_drift_mark = 0.0

    @property
    def media_servers(self) -> tuple[str, ...]:
        return self._fleet.ids

    async def run(self, stop: asyncio.Event) -> None:
        """One writer per server plus the housekeeping loop, until `stop`."""
        loops = [self._writer(server, stop) for server in self._fleet.ids] + [self._housekeeping(stop)]
        await asyncio.gather(*loops)

    async def _writer(self, server: str, stop: asyncio.Event) -> None:
        """Rounds of `server` right after a wake-up or a full batch, else every scan interval. The server's
        gauges are counted after a round that claimed nothing, else at most every GAUGE_REFRESH_SECONDS (a
        burst of wake-ups would otherwise add a count of the server's due rows to every claim)."""
        signal = self._owned.new_signal()
        claimed, counted_at = 0, 0.0
        while not stop.is_set():
            count = claimed == 0 or time.monotonic() - counted_at >= GAUGE_REFRESH_SECONDS
            claimed = await self._counted_round(self.run_server_once(server, stop, refresh_gauges=count))
            counted_at = time.monotonic() if count else counted_at
            if claimed < self._batch and not stop.is_set():
                await self._owned.wait(self._scan_interval, signal)

    async def _housekeeping(self, stop: asyncio.Event) -> None:
        """Drift marks and the rows of unregistered servers, every scan interval (or at once after a full
        batch). Device wake-ups are the writers': a server leaves the settings only with a restart, and the
        drift marks keep their own pace, so a round per wake-up would find nothing."""
        while not stop.is_set():
            await self._mark_drift_checks_when_due()
            claimed = await self._counted_round(self.run_unregistered_once(stop))
            if claimed < self._batch:
                await wait_for_stop(stop, self._scan_interval)

    async def _counted_round(self, round_: Awaitable[int]) -> int:
        try:
            claimed = await round_
        except STORE_ERRORS as exc:
            self._metrics.runs.labels(result=RunResult.ERROR).inc()
            log.warning("reconcile round failed", extra={"error_code": type(exc).__name__})
            return 0
        self._metrics.runs.labels(result=RunResult.OK).inc()
        return claimed

    async def mark_drift_checks(self) -> int:
        """Mark converged devices of the owned partitions that are due for re-verification (see run)."""
        if self._drift_check <= 0:
            return 0
        async with self._units() as uow:
            return await uow.reconcile.mark_drift_checks(
                sorted(self._owned.snapshot()), older_than_seconds=self._drift_check, limit=self._batch
            )

    async def _mark_drift_checks_when_due(self) -> None:
        if self._drift_check <= 0 or time.monotonic() < self._next_drift_mark:
            return
        self._next_drift_mark = time.monotonic() + max(1.0, self._drift_check / DRIFT_MARKS_PER_INTERVAL)
        try:
            if await self.mark_drift_checks():
                self._owned.wake()
        except STORE_ERRORS as exc:
            log.warning("drift check marking failed", extra={"error_code": type(exc).__name__})

    async def run_once(self, stop: asyncio.Event | None = None) -> int:
        """One round of every server's writer (one after the other) and of the unregistered rows; returns
        the number of claimed items."""
        claimed = 0
        for server in self._fleet.ids:
            claimed += await self.run_server_once(server, stop)
        return claimed + await self.run_unregistered_once(stop)

    async def run_server_once(
        self, server: str, stop: asyncio.Event | None = None, *, refresh_gauges: bool = True
    ) -> int:
        """One round of `server`'s writer; returns the number of claimed items. Once `stop` is set, the rest
        of the batch is released (fenced) instead of processed, so shutdown does not wait for a batch.
        `refresh_gauges`: count the server's unconverged and refused devices afterwards."""
        partitions = self._owned.snapshot()
        self._metrics.owned_partitions.labels().set(len(partitions))
        async with self._units() as uow:
            claimed = await uow.reconcile.claim(
                self._owner,
                sorted(partitions),
                media_server=server,
                lease_seconds=self._lease_seconds,
                limit=self._batch,
            )
        await self._work(claimed, server, stop)
        if refresh_gauges:
            async with self._units() as uow:
                convergence = await uow.reconcile.convergence(server)
            self._metrics.unconverged.labels(media_server=server).set(convergence.unconverged)
            self._metrics.refused.labels(media_server=server).set(convergence.refused)
        return len(claimed)

    async def run_unregistered_once(self, stop: asyncio.Event | None = None) -> int:
        """Fail (with backoff) the due rows of servers that are no longer registered: nothing to call."""
        async with self._units() as uow:
            claimed = await uow.reconcile.claim_unregistered(
                self._owner,
                sorted(self._owned.snapshot()),
                registered=self._fleet.ids,
                lease_seconds=self._lease_seconds,
                limit=self._batch,
            )
        await self._work(claimed, UNREGISTERED_SERVER_LABEL, stop)
        return len(claimed)

    async def _work(self, claimed: list[ClaimedItem], label: str, stop: asyncio.Event | None) -> None:
        """Work the batch in claim order, `ITEMS_IN_FLIGHT_PER_WRITER` items at a time: each item's database
        work (renew and load before, the result after) overlaps another item's MediaMTX calls, which still
        go one at a time per server (`ServerLanes`, first come first served). A store error stops the
        batch: no new item starts, those in flight finish, and the error is raised (the round fails; rows
        not started keep their lease until it expires, as before)."""
        pending = iter(claimed)
        failure: Exception | None = None

        async def lane() -> None:
            nonlocal failure
            for item in pending:
                if failure is not None:
                    return
                try:
                    await self._timed(item, label, stop)
                except Exception as exc:
                    failure = exc
                    return

        await asyncio.gather(*(lane() for _ in range(min(limits.ITEMS_IN_FLIGHT_PER_WRITER, len(claimed)))))
        if failure is not None:
            raise failure

    async def _timed(self, item: ClaimedItem, label: str, stop: asyncio.Event | None) -> None:
        started = time.monotonic()
        async with self._owned.working(item.partition):
            result = await self._one(item, label, stopping=stop is not None and stop.is_set())
        self._metrics.items.labels(result=result, media_server=label).inc()
        self._metrics.item_seconds.labels(result=result, media_server=label).observe(
            time.monotonic() - started
        )

    async def _one(self, item: ClaimedItem, label: str, *, stopping: bool) -> ItemResult:
        if stopping or not self._owned.owns(item.partition):
            return await self._release(item)
        if label == UNREGISTERED_SERVER_LABEL:
            return await self._items.fail(item, item.lease, NOT_REGISTERED)
        return await self._items.process(item)

    async def _release(self, item: ClaimedItem) -> ItemResult:
        try:
            async with self._units() as uow:
                await uow.reconcile.release(item)
        except LeaseLost:
            return ItemResult.LEASE_LOST
        return ItemResult.RELEASED
