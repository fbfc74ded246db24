"""The transcode worker: the loop that drives the `Transcoder` use case.

At start-up it recovers (`Transcoder.recover_at_start`), then runs a round at once; a round sweeps dead
attempts' `work/` folders and runs due jobs one after the other until none is due (or a stop or a drain). The
next round comes when the earliest known lease expires (plus `LEASE_EXPIRY_SLACK_SECONDS`), at the latest
after `rescan_seconds`, or at once when woken (an upload or a retry queued a job). A store outage only waits
for the next round.
"""

from __future__ import annotations

import asyncio
import logging

from media_worker.service_layer.transcoder import Transcoder
from yovision_platform.storage import STORE_ERRORS

__all__ = ["TranscodeWorker"]

log = logging.getLogger(__name__)


class TranscodeWorker:
    def __init__(self, transcoder: Transcoder, *, woken: asyncio.Event | None = None) -> None:
        self._transcoder = transcoder
        self.wake = woken if woken is not None else asyncio.Event()  # set: the next round starts at once

    async def run(self, stop: asyncio.Event) -> None:
        """Recover, process due jobs now, then again at the next lease expiry or rescan (or when woken)
        until `stop`."""
        transcoder = self._transcoder
        recovered = False
        while not stop.is_set():
            self.wake.clear()  # a wake-up during the round below makes the wait return at once
            try:
                if not recovered:
                    await transcoder.recover_at_start()
                    recovered = True
                await transcoder.sweep_work_folders()
                while not stop.is_set() and not transcoder.draining and await transcoder.run_once(stop):
                    pass
            except STORE_ERRORS as exc:
                log.warning(
                    "transcode round failed; waiting for the next", extra={"error_code": type(exc).__name__}
                )
            waiters = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self.wake.wait())}
            await asyncio.wait(
                waiters, timeout=await transcoder.next_round_in(), return_when=asyncio.FIRST_COMPLETED
            )
            for waiter in waiters:
                waiter.cancel()
