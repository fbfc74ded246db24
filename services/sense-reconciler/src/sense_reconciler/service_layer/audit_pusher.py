"""The audit push: Sense's device-audit facts, pushed to Bell as signed batches (the `bell-relay` worker).

The pusher that holds the fact cursor (`AuditPushStore.acquire`; the others wait as standbys) reads the next
facts of the window, at most 100, in id order, and pushes them as one signed request. Up to
`PIPELINE_DEPTH` requests are in flight; answers are settled in request order:

- every item ``accepted`` or ``duplicate``, some ``rejected``: the cursor moves past the batch, and the
  rejected facts are copied to the dead-letter table with Bell's code, in one fenced transaction;
- a whole-batch failure (network, timeout, 5xx, 401, 409, other refusal, a response with missing, extra or
  malformed results): the cursor stays, the requests after it are dropped, and the cursor backs off,
  ``next_attempt_at = now() + min(300 s, 1 s * 2**attempts)`` with a stable ``last_error_code``; then the
  batch is read and pushed again.

A worker killed after Bell stored a batch but before the cursor moved leaves the cursor before it; its
successor (after the 30 s lease) pushes the batch again and Bell answers ``duplicate``, so each fact is
stored once. A worker whose cursor was taken over gets `CursorFenced` and writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass

from sense_reconciler.domain.audit_push import AuditPushConfig
from sense_reconciler.domain.audit_push_outcome import BatchErrorCode, BatchFailure, ItemResults
from sense_reconciler.service_layer.metrics import AuditPushMetrics, ItemFate
from sense_reconciler.service_layer.ports import AuditFactReader, AuditPushStore, BellPort, FactBatch
from yovision_platform.db import STORE_ERRORS
from yovision_platform.outbox_windows import WindowPosition
from yovision_platform.shard_cursors import CursorFenced, ShardLease

__all__ = ["PIPELINE_DEPTH", "AuditPusher", "RoundResult"]

log = logging.getLogger(__name__)

# Bell takes ~5-15 ms per 100-fact batch; this many requests in flight keep it busy while answers return.
PIPELINE_DEPTH = 4

Answer = ItemResults | BatchFailure


@dataclass(frozen=True)
class RoundResult:
    claimed: int
    delivered: int = 0
    dead_lettered: int = 0
    failure: BatchErrorCode | None = None
    lease_lost: bool = False


class AuditPusher:
    """Pushes the facts of one store to Bell. Several pushers (processes) may run; one holds the cursor at
    a time."""

    def __init__(
        self,
        store: AuditPushStore,
        bell: BellPort,
        config: AuditPushConfig,
        *,
        metrics: AuditPushMetrics | None = None,
        pipeline_depth: int = PIPELINE_DEPTH,
    ) -> None:
        self._store = store
        self._bell = bell
        self._config = config
        self._metrics = metrics
        self._depth = pipeline_depth
        self._lease: ShardLease | None = None
        self._reader: AuditFactReader | None = None
        self._persisted: WindowPosition | None = None

    # -- holding the cursor ------------------------------------------------------------------------------

    async def _hold(self) -> bool:
        """Hold the cursor (take it if free or expired); False while another worker holds it."""
        if self._lease is not None:
            return True
        lease = await self._store.acquire()
        if lease is None:
            return False
        self._lease = lease
        self._reader = self._store.reader(lease, self._config.batch_size)
        self._persisted = lease.position
        return True

    def _lost(self, rows: int) -> RoundResult:
        log.warning("bell relay cursor taken over; round discarded", extra={"rows": rows})
        if self._metrics is not None:
            self._metrics.lease_lost.labels().inc()
        self._lease = self._reader = self._persisted = None
        return RoundResult(claimed=rows, lease_lost=True)

    async def _release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            with contextlib.suppress(*STORE_ERRORS):
                await self._store.release(lease)

    # -- one batch ---------------------------------------------------------------------------------------

    async def _read(self) -> FactBatch:
        assert self._reader is not None
        return await self._reader.next_batch()

    async def _settle(self, batch: FactBatch, answer: Answer) -> RoundResult:
        """Record Bell's answer to `batch`: move the cursor (dead letters included) or back off."""
        assert self._lease is not None
        assert self._reader is not None
        config = self._config
        rows = len(batch.facts)
        try:
            if isinstance(answer, BatchFailure):
                self._reader.reset(self._persisted or batch.before)
                await self._store.fail_batch(
                    self._lease,
                    answer.code,
                    base_seconds=config.backoff_base_seconds,
                    cap_seconds=config.backoff_cap_seconds,
                )
            else:
                dead = [
                    (fact.row_id, item.code or "rejected")
                    for fact, item in zip(batch.facts, answer.items, strict=True)
                    if not item.delivered
                ]
                await self._store.record_results(self._lease, batch.after, dead)
                self._persisted = batch.after
        except CursorFenced:
            return self._lost(rows)
        if isinstance(answer, BatchFailure):
            log.warning("bell relay batch failed", extra={"rows": rows, "error_code": answer.code})
            if self._metrics is not None:
                self._metrics.batch_failures.labels(reason=answer.code).inc()
            return RoundResult(claimed=rows, failure=answer.code)
        if self._metrics is not None:
            self._metrics.items.labels(fate=ItemFate.DELIVERED).inc(rows - len(dead))
            self._metrics.items.labels(fate=ItemFate.DEAD_LETTERED).inc(len(dead))
        if dead:
            log.warning(
                "bell relay dead-lettered facts",
                extra={"rows": len(dead), "error_code": sorted({code for _, code in dead})[0]},
            )
        return RoundResult(claimed=rows, delivered=rows - len(dead), dead_lettered=len(dead))

    async def run_once(self) -> RoundResult:
        """One batch, not pipelined: read, push, settle. Nothing happens while the cursor is backing off
        (by the store's clock) or held by another pusher."""
        if not await self._hold():
            return RoundResult(claimed=0)
        if await self._store.retry_in() > 0:
            return RoundResult(claimed=0)
        batch = await self._read()
        if not batch.facts:
            return RoundResult(claimed=0)
        return await self._settle(batch, await self._bell.send(batch.facts))

    # -- the loop ----------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Push until ``stop`` is set; a standby checks the cursor every third of a lease."""
        try:
            while not stop.is_set():
                try:
                    held = await self._hold()
                except STORE_ERRORS as exc:
                    log.warning(
                        "bell relay cannot reach the database", extra={"error_code": type(exc).__name__}
                    )
                    held = False
                if not held:
                    await _wait(stop, self._config.lease_seconds / 3)
                    continue
                await self._pipeline(stop)
        finally:
            await self._release()

    async def _pipeline(self, stop: asyncio.Event) -> None:
        """Push batches, `self._depth` in flight, until stopped or the cursor is lost."""
        config = self._config
        inflight: deque[tuple[FactBatch, asyncio.Task[Answer]]] = deque()
        assert self._lease is not None
        retry_at = time.monotonic() + self._lease.retry_in_seconds
        renew_at = time.monotonic() + config.lease_seconds / 3
        try:
            while not stop.is_set() and self._lease is not None:
                now = time.monotonic()
                if now >= renew_at:
                    if not await self._store.renew(self._lease):
                        self._lost(0)
                        return
                    renew_at = now + config.lease_seconds / 3
                if now < retry_at:
                    await _wait(stop, min(retry_at, renew_at) - now)
                    continue
                window_done = False
                while len(inflight) < self._depth and not window_done:
                    batch = await self._read()
                    if not batch.facts:
                        break
                    inflight.append((batch, asyncio.create_task(self._bell.send(batch.facts))))
                    window_done = batch.after.window_done
                if not inflight:
                    await _wait(stop, config.poll_interval_seconds)
                    continue
                batch, task = inflight.popleft()
                result = await self._settle(batch, await task)
                if result.failure is not None or result.lease_lost:
                    await _drop(inflight)
                    if result.failure is not None:
                        retry_at = time.monotonic() + await self._store.retry_in()
        except STORE_ERRORS as exc:
            log.warning("bell relay database call failed", extra={"error_code": type(exc).__name__})
            await _drop(inflight)
            if self._reader is not None and self._persisted is not None:
                self._reader.reset(self._persisted)
            await _wait(stop, config.backoff_base_seconds)
        finally:
            await _drop(inflight)


async def _drop(inflight: deque[tuple[FactBatch, asyncio.Task[Answer]]]) -> None:
    """Cancel requests whose answers no longer count (the cursor goes back before them)."""
    for _, task in inflight:
        task.cancel()
    for _, task in inflight:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    inflight.clear()


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    if seconds > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)
