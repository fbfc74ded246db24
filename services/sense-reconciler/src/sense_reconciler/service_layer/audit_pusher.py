"""The audit push: Sense's device-audit facts, pushed to Bell as signed batches (the `audit-push` worker).

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

import contextlib
import logging
from dataclasses import dataclass

from sense_reconciler.domain.audit_push import AuditPushConfig
from sense_reconciler.domain.audit_push_outcome import BatchFailure, ItemResults, PushFailureCode
from sense_reconciler.service_layer.metrics import AuditPushMetrics, ItemFate
from sense_reconciler.service_layer.ports import AuditFactReader, AuditPushStore, BellPort, FactBatch
from yovision_platform.messaging import CursorFenced, ShardLease, WindowPosition
from yovision_platform.storage import STORE_ERRORS

__all__ = ["Answer", "AuditPusher", "RoundResult"]

log = logging.getLogger(__name__)

Answer = ItemResults | BatchFailure


@dataclass(frozen=True)
class RoundResult:
    claimed: int
    delivered: int = 0
    dead_lettered: int = 0
    failure: PushFailureCode | None = None
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
    ) -> None:
        self._store = store
        self._bell = bell
        self._config = config
        self._metrics = metrics
        self._lease: ShardLease | None = None
        self._reader: AuditFactReader | None = None
        self._persisted: WindowPosition | None = None

    # -- holding the cursor ------------------------------------------------------------------------------

    @property
    def config(self) -> AuditPushConfig:
        return self._config

    @property
    def lease(self) -> ShardLease | None:
        """The cursor's lease while this pusher holds it."""
        return self._lease

    async def hold(self) -> bool:
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
        log.warning("audit push cursor taken over; round discarded", extra={"rows": rows})
        if self._metrics is not None:
            self._metrics.lease_lost.labels().inc()
        self._lease = self._reader = self._persisted = None
        return RoundResult(claimed=rows, lease_lost=True)

    async def renew(self) -> bool:
        """Renew the cursor's lease; False (and the cursor dropped) when another pusher took it over."""
        assert self._lease is not None
        if await self._store.renew(self._lease):
            return True
        self._lost(0)
        return False

    async def retry_in(self) -> float:
        """Seconds until the cursor's backoff ends (by the store's clock); 0 when it is not backing off."""
        return await self._store.retry_in()

    def rewind(self) -> None:
        """Read again from the last recorded position (answers to the batches after it no longer count)."""
        if self._reader is not None and self._persisted is not None:
            self._reader.reset(self._persisted)

    async def release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            with contextlib.suppress(*STORE_ERRORS):
                await self._store.release(lease)

    # -- one batch ---------------------------------------------------------------------------------------

    async def read(self) -> FactBatch:
        assert self._reader is not None
        return await self._reader.next_batch()

    async def send(self, batch: FactBatch) -> Answer:
        return await self._bell.send(batch.facts)

    async def settle(self, batch: FactBatch, answer: Answer) -> RoundResult:
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
            log.warning("audit push batch failed", extra={"rows": rows, "error_code": answer.code})
            if self._metrics is not None:
                self._metrics.batch_failures.labels(reason=answer.code).inc()
            return RoundResult(claimed=rows, failure=answer.code)
        if self._metrics is not None:
            self._metrics.items.labels(fate=ItemFate.DELIVERED).inc(rows - len(dead))
            self._metrics.items.labels(fate=ItemFate.DEAD_LETTERED).inc(len(dead))
        if dead:
            log.warning(
                "audit push dead-lettered facts",
                extra={"rows": len(dead), "error_code": sorted({code for _, code in dead})[0]},
            )
        return RoundResult(claimed=rows, delivered=rows - len(dead), dead_lettered=len(dead))

    async def run_once(self) -> RoundResult:
        """One batch, not pipelined: read, push, settle. Nothing happens while the cursor is backing off
        (by the store's clock) or held by another pusher."""
        if not await self.hold():
            return RoundResult(claimed=0)
        if await self._store.retry_in() > 0:
            return RoundResult(claimed=0)
        batch = await self.read()
        if not batch.facts:
            return RoundResult(claimed=0)
        return await self.settle(batch, await self.send(batch))
