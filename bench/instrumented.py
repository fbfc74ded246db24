"""An `OutboxRelay` that times its own phases, for the relay benchmark's breakdown.

`TimedRelay` only wraps the library's methods (claim, publish waves, each wave, settle) with timers and
calls the originals, so it measures the shipped code. `TimedSendProducer` wraps the producer to time the
`send()` calls alone (appending to aiokafka's accumulator); a wave's remaining time is mostly waiting for
the broker's acknowledgements.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from aiokafka import AIOKafkaProducer

from yovision_platform.relay import OutboxRelay, PublishError

__all__ = ["PhaseTimes", "TimedRelay", "TimedSendProducer"]


@dataclass
class PhaseTimes:
    """Seconds per phase, one entry per non-empty round (waves: one entry per wave)."""

    claim: list[float] = field(default_factory=list)
    publish: list[float] = field(default_factory=list)
    settle: list[float] = field(default_factory=list)
    wave: list[float] = field(default_factory=list)
    wave_rows: list[int] = field(default_factory=list)
    waves_per_round: list[int] = field(default_factory=list)


class TimedSendProducer:
    """Duck-typed stand-in for AIOKafkaProducer exposing what the relay uses: `send` and `stop`."""

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self._producer = producer
        self.send_seconds = 0.0
        self.sends = 0

    async def send(self, topic: str, value: bytes, **kwargs: Any) -> Any:
        started = time.perf_counter()
        future = await self._producer.send(topic, value, **kwargs)
        self.send_seconds += time.perf_counter() - started
        self.sends += 1
        return future

    async def stop(self) -> None:
        await self._producer.stop()


class TimedRelay(OutboxRelay):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.phases = PhaseTimes()

    async def _claim(self) -> list[asyncpg.Record]:
        started = time.perf_counter()
        rows = await super()._claim()
        if rows:
            self.phases.claim.append(time.perf_counter() - started)
        return rows

    async def _publish_in_waves(
        self, rows: Sequence[asyncpg.Record], deadline: float
    ) -> tuple[list[asyncpg.Record], list[asyncpg.Record], list[asyncpg.Record], PublishError | None]:
        waves_before = len(self.phases.wave)
        started = time.perf_counter()
        outcome = await super()._publish_in_waves(rows, deadline)
        self.phases.publish.append(time.perf_counter() - started)
        self.phases.waves_per_round.append(len(self.phases.wave) - waves_before)
        return outcome

    # The override keeps the library's signature, `timeout` included.
    async def _send_wave(
        self,
        rows: Sequence[asyncpg.Record],
        timeout: float,  # noqa: ASYNC109
    ) -> list[PublishError | None]:
        started = time.perf_counter()
        outcomes = await super()._send_wave(rows, timeout)
        self.phases.wave.append(time.perf_counter() - started)
        self.phases.wave_rows.append(len(rows))
        return outcomes

    async def _settle(
        self,
        acked: Sequence[asyncpg.Record],
        failed: Sequence[asyncpg.Record],
        not_sent: Sequence[asyncpg.Record],
        error: PublishError | None,
    ) -> int:
        started = time.perf_counter()
        lease_lost = await super()._settle(acked, failed, not_sent, error)
        self.phases.settle.append(time.perf_counter() - started)
        return lease_lost
