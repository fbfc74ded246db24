"""The reconcile loop: claim due rows of owned partitions, then per item renew -> MediaMTX -> complete/fail.

Safety rules (SPEC section 2):
- the lease is renewed before each item; a failed renewal is `lease_lost` and no MediaMTX call follows;
- every MediaMTX call needs the lease to outlive it by the local monotonic clock: before a call, the time
  since the renewal plus the call deadline must stay within the lease, otherwise the item is `lease_lost`
  without the call (covers a process paused, e.g. SIGSTOP, between renewal and call);
- complete/fail are fenced writes (owner + token + unexpired lease); a rejected write is `lease_lost`;
- success of an enabled device refreshes `media_path_ownership` and enqueues PathOwnershipRecorded
  (key = path name) in the same transaction as the completion.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

from sense_reconciler.adapters.mediamtx import MediaMtxClient, MediaMtxError
from sense_reconciler.adapters.reconcile_store import ClaimedItem, ReconcileStore, WorkItem
from sense_reconciler.domain import limits
from sense_reconciler.domain.model import DesiredState
from sense_reconciler.domain.reconcile import PathAction, PathConfig, plan_ensure, retry_backoff_seconds
from sense_reconciler.service_layer.metrics import ItemResult, ReconcileMetrics, RunResult
from sense_reconciler.service_layer.ownership import OwnedPartitions
from yovision_platform.avro import AvroSerde
from yovision_platform.db import DbConnection, Identifier
from yovision_platform.errors import ConfigError, LeaseLost
from yovision_platform.events import build_event
from yovision_platform.outbox import Outbox, OutboxMessage

log = logging.getLogger(__name__)
# How often per drift interval the loop looks for converged devices to re-verify.
DRIFT_MARKS_PER_INTERVAL = 10

T = TypeVar("T")


class Reconciler:
    def __init__(
        self,
        pool: asyncpg.Pool,
        schema: Identifier,
        mediamtx: MediaMtxClient,
        owned: OwnedPartitions,
        metrics: ReconcileMetrics,
        serde: AvroSerde,
        *,
        owner: str,
        lease_seconds: float = limits.LEASE_SECONDS_DEFAULT,
        batch: int = limits.CLAIM_BATCH_DEFAULT_ITEMS,
        scan_interval_seconds: float = limits.SCAN_INTERVAL_SECONDS_DEFAULT,
        ownership_topic: str | None = None,
        drift_check_seconds: float = limits.DRIFT_CHECK_SECONDS_DEFAULT,
    ) -> None:
        if mediamtx.deadline_seconds >= lease_seconds:
            raise ConfigError(
                "SENSE_OPERATION_DEADLINE_SECONDS", "not_below_lease", "deadline must be < lease"
            )
        if not 1 <= batch <= limits.CLAIM_BATCH_MAX_ITEMS:
            raise ConfigError(
                "SENSE_CLAIM_BATCH", "out_of_range", f"must be 1..{limits.CLAIM_BATCH_MAX_ITEMS}"
            )
        self._pool = pool
        self._store = ReconcileStore(schema)
        self._outbox = Outbox(schema)
        self._mediamtx = mediamtx
        self._owned = owned
        self._metrics = metrics
        self._serde = serde
        # None: the catalogue's topic (sense.path-ownership.v1)
        self._ownership_topic = ownership_topic
        self._owner = owner
        self._lease_seconds = lease_seconds
        self._batch = batch
        self._scan_interval = scan_interval_seconds
        # 0: off. Else converged devices are re-verified against MediaMTX once their last result is older.
        self._drift_check = drift_check_seconds
        self._next_drift_mark = 0.0

    async def run(self, stop: asyncio.Event) -> None:
        """Rounds until `stop`: right after a wake-up or a full batch, else every scan interval."""
        while not stop.is_set():
            try:
                await self._mark_drift_checks_when_due()
                claimed = await self.run_once(stop)
                self._metrics.runs.labels(result=RunResult.OK).inc()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                self._metrics.runs.labels(result=RunResult.ERROR).inc()
                log.warning("reconcile round failed", extra={"error_code": type(exc).__name__})
                claimed = 0
            if claimed < self._batch and not stop.is_set():
                await self._owned.wait(self._scan_interval)

    async def mark_drift_checks(self) -> int:
        """Mark converged devices of the owned partitions that are due for re-verification (see run)."""
        if self._drift_check <= 0:
            return 0
        async with self._pool.acquire() as conn:
            return await self._store.mark_drift_checks(
                conn, sorted(self._owned.snapshot()), older_than_seconds=self._drift_check, limit=self._batch
            )

    async def _mark_drift_checks_when_due(self) -> None:
        if self._drift_check <= 0 or time.monotonic() < self._next_drift_mark:
            return
        self._next_drift_mark = time.monotonic() + max(1.0, self._drift_check / DRIFT_MARKS_PER_INTERVAL)
        if await self.mark_drift_checks():
            self._owned.wake()

    async def run_once(self, stop: asyncio.Event | None = None) -> int:
        """One round; returns the number of claimed items. Once `stop` is set, the rest of the batch is
        released (fenced) instead of processed, so shutdown does not wait for a whole batch."""
        partitions = self._owned.snapshot()
        self._metrics.owned_partitions.labels().set(len(partitions))
        async with self._pool.acquire() as conn:
            async with conn.transaction():
                claimed = await self._store.claim(
                    conn,
                    self._owner,
                    sorted(partitions),
                    lease_seconds=self._lease_seconds,
                    limit=self._batch,
                )
            for item in claimed:
                started = time.monotonic()
                stopping = stop is not None and stop.is_set()
                async with self._owned.working(item.partition):
                    result = await (self._release(conn, item) if stopping else self._process(conn, item))
                self._metrics.items.labels(result=result).inc()
                self._metrics.item_seconds.labels(result=result).observe(time.monotonic() - started)
            self._metrics.unconverged.labels().set(await self._store.unconverged_count(conn))
        return len(claimed)

    async def _release(self, conn: DbConnection, item: ClaimedItem) -> ItemResult:
        try:
            await self._store.release(conn, item)
        except LeaseLost:
            return ItemResult.LEASE_LOST
        return ItemResult.RELEASED

    async def _process(self, conn: DbConnection, item: ClaimedItem) -> ItemResult:
        if not self._owned.owns(item.partition):
            return await self._release(conn, item)
        renewed_at = time.monotonic()
        try:
            work = await self._store.renew_and_load(conn, item, lease_seconds=self._lease_seconds)
        except LeaseLost:
            log.info("lease lost before reconcile", extra={"partition": item.partition})
            return ItemResult.LEASE_LOST
        try:
            await self._apply(work, renewed_at)
        except LeaseLost:
            log.info(
                "lease would expire during a MediaMTX call; skipped", extra={"partition": item.partition}
            )
            return ItemResult.LEASE_LOST
        except MediaMtxError as exc:
            return await self._fail(conn, item, work, exc.code)
        try:
            async with conn.transaction():
                await self._store.complete(conn, work)
                if work.desired_state == DesiredState.ENABLED:
                    await self._record_ownership(conn, work)
        except LeaseLost:
            log.info("completion rejected: lease lost", extra={"partition": item.partition})
            return ItemResult.LEASE_LOST
        return ItemResult.CONVERGED

    async def _apply(self, work: WorkItem, renewed_at: float) -> None:
        guarded = self._guard(renewed_at)
        if work.desired_state == DesiredState.DISABLED:
            await guarded(lambda: self._mediamtx.delete_path(work.path_name))
            return
        desired = PathConfig(work.source_uri)
        observed = await guarded(lambda: self._mediamtx.get_path(work.path_name))
        action = plan_ensure(desired, observed)
        if action is PathAction.ADD:
            await guarded(lambda: self._mediamtx.add_path(work.path_name, desired))
        elif action is PathAction.REPLACE:
            await guarded(lambda: self._mediamtx.replace_path(work.path_name, desired))

    def _guard(self, renewed_at: float) -> Callable[[Callable[[], Awaitable[T]]], Awaitable[T]]:
        deadline = self._mediamtx.deadline_seconds

        async def call(operation: Callable[[], Awaitable[T]]) -> T:
            if time.monotonic() - renewed_at + deadline >= self._lease_seconds:
                raise LeaseLost()
            return await operation()

        return call

    async def _fail(self, conn: DbConnection, item: ClaimedItem, work: WorkItem, code: str) -> ItemResult:
        delay = retry_backoff_seconds(item.attempts + 1)
        try:
            await self._store.fail(conn, item, work.lease, error_code=code, retry_in_seconds=delay)
        except LeaseLost:
            return ItemResult.LEASE_LOST
        log.warning("reconcile failed", extra={"error_code": code, "partition": item.partition})
        return ItemResult.FAILED

    async def _record_ownership(self, conn: DbConnection, work: WorkItem) -> None:
        seen = await self._store.record_ownership(conn, work)
        payload = {
            "path_name": work.path_name,
            "device_id": str(work.device_id),
            "tenant_id": work.tenant_id,
            "site_id": work.site_id,
            "first_seen_at": seen.first_seen_at,
            "last_seen_at": seen.last_seen_at,
        }
        event = build_event(
            self._serde,
            "PathOwnershipRecorded",
            work.path_name,
            payload,
            event_id=uuid.uuid4(),
        )
        await self._outbox.enqueue(conn, OutboxMessage.from_event(event, topic=self._ownership_topic))
