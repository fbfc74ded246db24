"""The scheduler worker (the due scan): claims due watchers and runs their checks concurrently, safe across
instances. The loop only: the claim and the check are the `CheckRunner` use case's.

Due-ness lives only in the database (`next_check_at`). Every SCAN_INTERVAL_SECONDS the scheduler claims
up to SCAN_BATCH_SIZE due ACTIVE watchers with `FOR UPDATE SKIP LOCKED` plus a DB-clock lease (LeaseTable),
so two instances never claim the same watcher, and a claimed watcher is not claimable again until its check
has written `next_check_at` (which releases the lease) or the lease expired. Within one process a watcher
is single-flight (`_in_flight`). A full batch is followed by another claim at once (a backlog drains
without waiting 30 s per 50 watchers), up to MAX_IN_FLIGHT concurrent checks; a hanging probe occupies
one slot only until its own timeout, never the scan loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from signal_watcher.service_layer.checks import LEASE_SECONDS, CheckRunner
from signal_watcher.service_layer.ports import ClaimedWatcher

__all__ = ["LEASE_SECONDS", "MAX_IN_FLIGHT", "SCAN_BATCH_SIZE", "SCAN_INTERVAL_SECONDS", "Scheduler"]

log = logging.getLogger(__name__)

SCAN_INTERVAL_SECONDS = 30.0
SCAN_BATCH_SIZE = 50
MAX_IN_FLIGHT = 500
STOP_GRACE_SECONDS = 10.0


class Scheduler:
    def __init__(
        self,
        runner: CheckRunner,
        owner: str,
        *,
        scan_interval_seconds: float = SCAN_INTERVAL_SECONDS,
        batch_size: int = SCAN_BATCH_SIZE,
        max_in_flight: int = MAX_IN_FLIGHT,
        woken: asyncio.Event | None = None,
    ) -> None:
        self._runner = runner
        self._owner = owner
        self._interval = scan_interval_seconds
        self._batch = batch_size
        self._max_in_flight = max_in_flight
        self._in_flight: dict[uuid.UUID, asyncio.Task[None]] = {}
        self._woken = woken if woken is not None else asyncio.Event()  # `wake`, or whoever holds it
        self.checks_done = 0

    def wake(self) -> None:
        """Scan now instead of at the end of the interval (a user asked for a check)."""
        self._woken.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Worker entry point: scan until `stop`, then let in-flight checks finish (bounded)."""
        try:
            while not stop.is_set():
                self._woken.clear()
                await self.scan(stop)
                await self._sleep(stop)
        finally:
            await self.drain(STOP_GRACE_SECONDS)

    async def _sleep(self, stop: asyncio.Event) -> None:
        """Until the interval passed, ``stop`` is set or :meth:`wake` is called."""
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._woken.wait())]
        try:
            await asyncio.wait(waits, timeout=self._interval, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    async def scan(self, stop: asyncio.Event | None = None) -> int:
        """Claim and start due checks until no full batch is left; returns how many were started."""
        started = 0
        while stop is None or not stop.is_set():
            capacity = self._max_in_flight - len(self._in_flight)
            if capacity <= 0:
                await asyncio.wait(list(self._in_flight.values()), return_when=asyncio.FIRST_COMPLETED)
                continue
            limit = min(self._batch, capacity)
            claimed = await self._runner.claim_due(self._owner, limit=limit)
            for claim in claimed:
                watcher_id = claim.watcher_id
                if watcher_id in self._in_flight:
                    continue
                task = asyncio.create_task(self._check(claim), name=f"check-{watcher_id}")
                self._in_flight[watcher_id] = task
                started += 1
            if len(claimed) < limit:
                return started
        return started

    async def _check(self, claim: ClaimedWatcher) -> None:
        try:
            await self._runner.run(claim)
            self.checks_done += 1
        except Exception as exc:
            # Only the class: messages and tracebacks of unexpected errors may quote the URL or a header.
            log.error(
                "check crashed; the lease expires and the watcher is retried",
                extra={"error_code": type(exc).__name__},
            )
        finally:
            self._in_flight.pop(claim.watcher_id, None)

    async def drain(self, timeout_seconds: float) -> None:
        tasks = list(self._in_flight.values())
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout_seconds)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
