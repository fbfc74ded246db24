"""The Bell relay loop: claim → push one signed batch → record each item's outcome.

One round:

1. **Claim** (own transaction): up to 100 due facts, oldest due first, leased for 30 s by the DB clock.
2. **Push** them as one signed request, under a deadline shorter than the lease.
3. **Record** (own transaction, fenced on the lease): ``accepted``/``duplicate`` → ``delivered_at``;
   ``rejected`` → dead letter with Bell's code. A whole-batch failure (network, timeout, 5xx, 401, 409,
   other refusal, a response with missing, extra or malformed results) backs every row off:
   ``next_attempt_at = now() + min(300 s, 1 s * 2**attempts)`` and a stable ``last_error_code``.

A worker killed between 2 and 3 leaves the rows leased; after the lease expires another round sends them
again and Bell answers ``duplicate`` for the facts it already has, so each fact is stored once. A worker
whose lease expired gets :class:`LeaseLost` at step 3 and writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

import asyncpg

from sense_reconciler.bell_relay.client import BellClient
from sense_reconciler.bell_relay.config import RelayConfig
from sense_reconciler.bell_relay.metrics import BellRelayMetrics, ItemFate
from sense_reconciler.bell_relay.outcome import BatchErrorCode, BatchFailure
from sense_reconciler.bell_relay.repository import OutboxRepository
from yovision_platform.db import Identifier
from yovision_platform.errors import LeaseLost

__all__ = ["BellRelayWorker", "RoundResult"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoundResult:
    claimed: int
    delivered: int = 0
    dead_lettered: int = 0
    failure: BatchErrorCode | None = None
    lease_lost: bool = False


class BellRelayWorker:
    """Relays one schema's ``device_operation_outbox``. Several workers (processes) may run at once."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        schema: Identifier,
        config: RelayConfig,
        *,
        owner: str,
        metrics: BellRelayMetrics | None = None,
    ) -> None:
        self._pool = pool
        self._repo = OutboxRepository(schema)
        self._config = config
        self._owner = owner
        self._metrics = metrics

    async def run(self, stop: asyncio.Event) -> None:
        """Relay until ``stop`` is set. A full batch is followed at once by the next round."""
        async with BellClient(self._config) as client:
            while not stop.is_set():
                result = await self.run_once(client)
                if result.claimed < self._config.batch_size or result.failure or result.lease_lost:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), self._config.poll_interval_seconds)

    async def run_once(self, client: BellClient) -> RoundResult:
        config = self._config
        async with self._pool.acquire() as conn:
            claim = await self._repo.claim(
                conn, self._owner, limit=config.batch_size, lease_seconds=config.lease_seconds
            )
        if not claim.facts:
            return RoundResult(claimed=0)
        answer = await client.send([claimed.fact for claimed in claim.facts])
        try:
            async with self._pool.acquire() as conn:
                if isinstance(answer, BatchFailure):
                    await self._repo.fail_batch(
                        conn,
                        claim,
                        answer.code,
                        base_seconds=config.backoff_base_seconds,
                        cap_seconds=config.backoff_cap_seconds,
                    )
                else:
                    delivered = [
                        c.fact.row_id
                        for c, item in zip(claim.facts, answer.items, strict=True)
                        if item.delivered
                    ]
                    dead = [
                        (c.fact.row_id, item.code or "rejected")
                        for c, item in zip(claim.facts, answer.items, strict=True)
                        if not item.delivered
                    ]
                    await self._repo.record_results(conn, claim, delivered, dead)
        except LeaseLost:
            log.warning("bell relay lease lost; round discarded", extra={"rows": len(claim.facts)})
            if self._metrics is not None:
                self._metrics.lease_lost.labels().inc()
            return RoundResult(claimed=len(claim.facts), lease_lost=True)
        if isinstance(answer, BatchFailure):
            log.warning(
                "bell relay batch failed", extra={"rows": len(claim.facts), "error_code": answer.code}
            )
            if self._metrics is not None:
                self._metrics.batch_failures.labels(reason=answer.code).inc()
            return RoundResult(claimed=len(claim.facts), failure=answer.code)
        if self._metrics is not None:
            self._metrics.items.labels(fate=ItemFate.DELIVERED).inc(len(delivered))
            self._metrics.items.labels(fate=ItemFate.DEAD_LETTERED).inc(len(dead))
        if dead:
            log.warning(
                "bell relay dead-lettered facts",
                extra={"rows": len(dead), "error_code": sorted({code for _, code in dead})[0]},
            )
        return RoundResult(claimed=len(claim.facts), delivered=len(delivered), dead_lettered=len(dead))
