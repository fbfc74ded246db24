"""The `audit-push` worker: the audit push loop. It drives the `AuditPusher` use case
(service_layer.audit_pusher): a standby checks the cursor every third of a lease; the pusher that holds it
pushes batches, `PIPELINE_DEPTH` requests in flight, settling the answers in request order."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import asyncpg

from sense_reconciler.adapters.audit_push_store import PostgresAuditPushStore
from sense_reconciler.adapters.bell_client import BellClient
from sense_reconciler.domain.audit_push import AuditPushConfig
from sense_reconciler.service_layer.audit_pusher import Answer, AuditPusher
from sense_reconciler.service_layer.metrics import AuditPushMetrics
from sense_reconciler.service_layer.ports import FactBatch
from yovision_platform.storage import STORE_ERRORS, Identifier

WORKER_NAME = "audit-push"  # the name /readyz and the doctor report (formerly `bell-relay`)
# Bell takes ~5-15 ms per 100-fact batch; this many requests in flight keep it busy while answers return.
PIPELINE_DEPTH = 4

log = logging.getLogger(__name__)


class AuditPushWorker:
    """Pushes until stopped. `close_on_stop` (closes the pusher's connection pool to Bell) is awaited once
    the process stops, not when a run crashes: the platform restarts a crashed worker on the same pusher."""

    def __init__(
        self,
        pusher: AuditPusher,
        *,
        close_on_stop: Callable[[], Awaitable[None]] | None = None,
        pipeline_depth: int = PIPELINE_DEPTH,
    ) -> None:
        self._pusher = pusher
        self._close_on_stop = close_on_stop
        self._depth = pipeline_depth

    async def run(self, stop: asyncio.Event) -> None:
        """Push until ``stop`` is set; a standby checks the cursor every third of a lease."""
        pusher = self._pusher
        try:
            while not stop.is_set():
                try:
                    held = await pusher.hold()
                except STORE_ERRORS as exc:
                    log.warning(
                        "audit push cannot reach the database", extra={"error_code": type(exc).__name__}
                    )
                    held = False
                if not held:
                    await _wait(stop, pusher.config.lease_seconds / 3)
                    continue
                await self._pipeline(stop)
        finally:
            await pusher.release()
            if self._close_on_stop is not None and stop.is_set():
                await self._close_on_stop()

    async def _pipeline(self, stop: asyncio.Event) -> None:
        """Push batches, `self._depth` in flight, until stopped or the cursor is lost."""
        pusher = self._pusher
        config = pusher.config
        inflight: deque[tuple[FactBatch, asyncio.Task[Answer]]] = deque()
        assert pusher.lease is not None
        retry_at = time.monotonic() + pusher.lease.retry_in_seconds
        renew_at = time.monotonic() + config.lease_seconds / 3
        try:
            while not stop.is_set() and pusher.lease is not None:
                now = time.monotonic()
                if now >= renew_at:
                    if not await pusher.renew():
                        return
                    renew_at = now + config.lease_seconds / 3
                if now < retry_at:
                    await _wait(stop, min(retry_at, renew_at) - now)
                    continue
                window_done = False
                while len(inflight) < self._depth and not window_done:
                    batch = await pusher.read()
                    if not batch.facts:
                        break
                    inflight.append((batch, asyncio.create_task(pusher.send(batch))))
                    window_done = batch.after.window_done
                if not inflight:
                    await _wait(stop, config.poll_interval_seconds)
                    continue
                batch, task = inflight.popleft()
                result = await pusher.settle(batch, await task)
                if result.failure is not None or result.lease_lost:
                    await _drop(inflight)
                    if result.failure is not None:
                        retry_at = time.monotonic() + await pusher.retry_in()
        except STORE_ERRORS as exc:
            log.warning("audit push database call failed", extra={"error_code": type(exc).__name__})
            await _drop(inflight)
            pusher.rewind()
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


def audit_push_worker(
    pool: asyncpg.Pool,
    schema: Identifier,
    config: AuditPushConfig,
    *,
    owner: str,
    metrics: AuditPushMetrics | None = None,
) -> Callable[[asyncio.Event], Coroutine[Any, Any, None]]:
    """A standalone audit push worker on PostgreSQL (for bell-receiver's benchmark, which runs several
    without a whole Sense): the production process wires its pusher through `bootstrap` instead."""
    store = PostgresAuditPushStore(pool, schema, owner, lease_seconds=config.lease_seconds)
    bell = BellClient(config)
    return AuditPushWorker(AuditPusher(store, bell, config, metrics=metrics), close_on_stop=bell.aclose).run
