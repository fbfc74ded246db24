"""The reconcile use case: one writer per MediaMTX server (its loop: entrypoints.reconciler_worker), each
claiming the due rows of that server from the partitions this instance owns and working them in claim order
(service_layer.reconcile_item), a few at a time so that the database work of one item overlaps the MediaMTX
calls of another.

Why one writer per server: MediaMTX applies every config change by itself, one after the other, re-applying
its whole configuration each time; concurrent calls from one process would only queue inside MediaMTX and
lengthen every call, and two writers racing on one server could read each other's half-applied state. So
each server gets exactly one sequential stream of calls from this process (`ServerLanes`), and the servers
of a fleet are worked in parallel. What a writer overlaps is only its own database work (renew and load the
next item, record the previous one's result): the server never waits between two calls on it. Across
instances, the partition ownership keeps every device with one instance.

Besides the writers' rounds, housekeeping marks converged devices for re-verification (drift check) and
fails, with the stable code `media_server_not_registered`, rows of servers removed from the settings.
"""

from __future__ import annotations

import asyncio
import time

from sense_reconciler.domain import limits
from sense_reconciler.domain.reconcile import ClaimedItem
from sense_reconciler.service_layer.metrics import (
    UNREGISTERED_SERVER_LABEL,
    ReconcileItemResult,
    ReconcileMetrics,
)
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.ports import MediaServerFleet, UnitOfWorkFactory
from sense_reconciler.service_layer.reconcile_item import NOT_REGISTERED, ItemReconciler, ServerLanes
from sense_reconciler.service_layer.source_uris import SourceUris
from yovision_platform.errors import ConfigError, LeaseLost
from yovision_platform.messaging import AvroSerde


class Reconciler:
    def __init__(
        self,
        units: UnitOfWorkFactory,
        fleet: MediaServerFleet,
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
        self._drift_check = drift_check_seconds

    @property
    def media_servers(self) -> tuple[str, ...]:
        return self._fleet.ids

    @property
    def owned(self) -> OwnedPartitions:
        return self._owned

    @property
    def metrics(self) -> ReconcileMetrics:
        return self._metrics

    @property
    def batch(self) -> int:
        """The most rows one round claims: a round that claimed fewer found no more due rows."""
        return self._batch

    @property
    def scan_interval_seconds(self) -> float:
        return self._scan_interval

    @property
    def drift_check_seconds(self) -> float:
        """0: off. Else converged devices are re-verified against MediaMTX once their last result is older."""
        return self._drift_check

    async def mark_drift_checks(self) -> int:
        """Mark converged devices of the owned partitions that are due for re-verification (see run)."""
        if self._drift_check <= 0:
            return 0
        async with self._units() as uow:
            return await uow.reconcile.mark_drift_checks(
                sorted(self._owned.snapshot()), older_than_seconds=self._drift_check, limit=self._batch
            )

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

    async def _one(self, item: ClaimedItem, label: str, *, stopping: bool) -> ReconcileItemResult:
        if stopping or not self._owned.owns(item.partition):
            return await self._release(item)
        if label == UNREGISTERED_SERVER_LABEL:
            return await self._items.fail(item, item.lease, NOT_REGISTERED)
        return await self._items.process(item)

    async def _release(self, item: ClaimedItem) -> ReconcileItemResult:
        try:
            async with self._units() as uow:
                await uow.reconcile.release(item)
        except LeaseLost:
            return ReconcileItemResult.LEASE_LOST
        return ReconcileItemResult.RELEASED
