"""Run a failing worker under the process shell's supervisor (no restart backoff) until it gives up."""

from __future__ import annotations

import asyncio

import pytest

from yovision_platform.web import _service as service


async def supervise_failing(monkeypatch: pytest.MonkeyPatch, failure: Exception, failures: int) -> int:
    """Supervise a worker that raises `failure` on its first `failures` runs, then returns; the run count."""
    monkeypatch.setattr(service, "WORKER_RESTART_BACKOFF_BASE_SECONDS", 0.0)
    stop = asyncio.Event()
    runs = 0

    async def worker(_: asyncio.Event) -> None:
        nonlocal runs
        runs += 1
        if runs > failures:
            stop.set()
            return
        raise failure

    ctx = service.ServiceContext.__new__(service.ServiceContext)
    ctx.worker_alive = {}
    await asyncio.wait_for(service._supervise(ctx, "worker", worker, stop), 60)
    return runs
