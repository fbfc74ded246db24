"""Worker ``metrics-refresher``: a `MetricsRefresher.refresh` every `interval_seconds`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from orphan_scanner.domain import limits
from orphan_scanner.service_layer.metrics_refresher import MetricsRefresher
from yovision_platform.backoff import wait_for_stop


def metrics_refresher_worker(
    refresher: MetricsRefresher, interval_seconds: float = limits.METRICS_REFRESH_SECONDS_DEFAULT
) -> Callable[[asyncio.Event], Awaitable[None]]:
    async def run(stop: asyncio.Event) -> None:
        while not stop.is_set():
            await refresher.refresh()
            await wait_for_stop(stop, interval_seconds)

    return run
