"""The `reconciler` worker: one writer loop per MediaMTX server plus the housekeeping loop, driving the
`Reconciler` use case (service_layer.reconciler) until stopped."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable

from sense_reconciler.service_layer.metrics import RunResult
from sense_reconciler.service_layer.reconciler import Reconciler
from yovision_platform.backoff import wait_for_stop
from yovision_platform.storage import STORE_ERRORS

log = logging.getLogger(__name__)
# How often per drift interval the loop looks for converged devices to re-verify.
DRIFT_MARKS_PER_INTERVAL = 10
# While a writer keeps claiming, its server's unconverged/refused gauges are counted at most this often.
GAUGE_REFRESH_SECONDS = 1.0


class ReconcilerWorker:
    def __init__(self, reconciler: Reconciler) -> None:
        self._reconciler = reconciler
        self._next_drift_mark = 0.0

    async def run(self, stop: asyncio.Event) -> None:
        """One writer per server plus the housekeeping loop, until `stop`."""
        servers = self._reconciler.media_servers
        await asyncio.gather(*[self._writer(server, stop) for server in servers], self._housekeeping(stop))

    async def _writer(self, server: str, stop: asyncio.Event) -> None:
        """Rounds of `server` right after a wake-up or a full batch, else every scan interval. The server's
        gauges are counted after a round that claimed nothing, else at most every GAUGE_REFRESH_SECONDS (a
        burst of wake-ups would otherwise add a count of the server's due rows to every claim)."""
        reconciler = self._reconciler
        signal = reconciler.owned.new_signal()
        claimed, counted_at = 0, 0.0
        while not stop.is_set():
            count = claimed == 0 or time.monotonic() - counted_at >= GAUGE_REFRESH_SECONDS
            claimed = await self._counted_round(
                reconciler.run_server_once(server, stop, refresh_gauges=count)
            )
            counted_at = time.monotonic() if count else counted_at
            if claimed < reconciler.batch and not stop.is_set():
                await reconciler.owned.wait(reconciler.scan_interval_seconds, signal)

    async def _housekeeping(self, stop: asyncio.Event) -> None:
        """Drift marks and the rows of unregistered servers, every scan interval (or at once after a full
        batch). Device wake-ups are the writers': a server leaves the settings only with a restart, and the
        drift marks keep their own pace, so a round per wake-up would find nothing."""
        reconciler = self._reconciler
        while not stop.is_set():
            await self._mark_drift_checks_when_due()
            claimed = await self._counted_round(reconciler.run_unregistered_once(stop))
            if claimed < reconciler.batch:
                await wait_for_stop(stop, reconciler.scan_interval_seconds)

    async def _counted_round(self, round_: Awaitable[int]) -> int:
        metrics = self._reconciler.metrics
        try:
            claimed = await round_
        except STORE_ERRORS as exc:
            metrics.runs.labels(result=RunResult.ERROR).inc()
            log.warning("reconcile round failed", extra={"error_code": type(exc).__name__})
            return 0
        metrics.runs.labels(result=RunResult.OK).inc()
        return claimed

    async def _mark_drift_checks_when_due(self) -> None:
        drift_check = self._reconciler.drift_check_seconds
        if drift_check <= 0 or time.monotonic() < self._next_drift_mark:
            return
        self._next_drift_mark = time.monotonic() + max(1.0, drift_check / DRIFT_MARKS_PER_INTERVAL)
        try:
            if await self._reconciler.mark_drift_checks():
                self._reconciler.owned.wake()
        except STORE_ERRORS as exc:
            log.warning("drift check marking failed", extra={"error_code": type(exc).__name__})
