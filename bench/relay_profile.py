"""cProfile of one relay drain (`--profile`): where the relay process spends its CPU.

cProfile hooks the whole thread, so every coroutine and callback of the event loop is covered. Code in C
extensions that calls no Python (asyncpg's protocol, for instance) is charged to the Python frame that
runs it -- often asyncio's `Handle._run`.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections import defaultdict
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer

from bench.infra import BenchSchema
from bench.produce import relay_linger, started_producer
from bench.relay_throughput import drain_relay
from bench.stats import per_second
from yovision_platform.relay import OutboxRelay, RelayConfig

__all__ = ["RelayProfile", "profile_relay"]

PROFILE_TOP_FUNCTIONS = 25
# Path fragments naming the area a function belongs to, first match wins.
PROFILE_AREAS = (
    ("yovision_platform", "yovision_platform"),
    ("aiokafka", "aiokafka"),
    ("asyncpg", "asyncpg"),
    ("asyncio", "asyncio (loop, incl. C-extension protocol work)"),
    ("json", "json"),
    ("uuid", "uuid"),
    ("bench", "bench harness"),
)


@dataclass(frozen=True)
class RelayProfile:
    batch_size: int
    published: int
    wall_seconds: float
    profiled_seconds: float
    by_area: dict[str, float]
    top_functions: str

    @property
    def events_per_second(self) -> float:
        return per_second(self.published, self.wall_seconds)


IDLE_AREA = "idle: waiting in epoll for PostgreSQL/Kafka"


def _area(filename: str, function: str) -> str:
    if "select.epoll" in function:
        return IDLE_AREA
    if filename == "~" or filename.startswith("<"):
        return "builtins / C calls"
    for fragment, area in PROFILE_AREAS:
        if f"/{fragment}/" in filename or filename.endswith(f"/{fragment}.py"):
            return area
    return "other python"


def _by_area(stats: pstats.Stats) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    raw_stats: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]
    for (filename, _, function), (_, _, tottime, _, _) in raw_stats.items():
        totals[_area(filename, function)] += tottime
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


async def profile_relay(schema: BenchSchema, bootstrap: str, topic: str, *, batch_size: int) -> RelayProfile:
    producer = await started_producer(
        bootstrap, topic, client_id="bench-relay-profile", linger_ms=relay_linger(None)
    )

    async def producer_factory() -> AIOKafkaProducer:
        return producer

    relay = OutboxRelay(
        schema.pool,
        schema.name,
        producer_factory,
        owner="bench-relay-profile",
        config=RelayConfig(batch_size=batch_size),
    )
    profiler = cProfile.Profile()
    started_at = time.perf_counter()
    try:
        profiler.enable()
        drained = await drain_relay(relay)
        profiler.disable()
    finally:
        await relay.close()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.strip_dirs().sort_stats("tottime").print_stats(PROFILE_TOP_FUNCTIONS)
    by_area = _by_area(pstats.Stats(profiler))
    return RelayProfile(
        batch_size=batch_size,
        published=drained.published,
        wall_seconds=drained.last_productive_at - started_at,
        profiled_seconds=sum(by_area.values()),
        by_area=by_area,
        top_functions=text.getvalue(),
    )
