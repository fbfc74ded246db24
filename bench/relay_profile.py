"""cProfile of one relay drain: where the relay process spends its CPU.

cProfile hooks the whole thread, so every coroutine and callback of the event loop is covered. Code in C
extensions that calls no Python (asyncpg's protocol, for instance) is charged to the Python frame that
runs it -- often asyncio's `Handle._run`.
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import pstats
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from bench.infra import BenchSchema, BenchTopics, Stack
from bench.relay_throughput import insert_in_one_transaction, wait_all_passed, wait_split
from bench.stats import per_second
from yovision_platform.messaging import (
    KafkaNames,
    OutboxMessage,
    OutboxRelay,
    OutboxRelayConfig,
    confluent_publisher_factory,
    executor_for,
)

__all__ = ["RelayProfile", "profile_relay"]

PROFILE_TOP_FUNCTIONS = 25
# Path fragments naming the area a function belongs to, first match wins.
PROFILE_AREAS = (
    ("yovision_platform", "yovision_platform"),
    ("aiokafka", "aiokafka"),
    ("confluent_kafka", "confluent_kafka (librdkafka calls)"),
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


async def profile_relay(
    stack: Stack,
    schema: BenchSchema,
    topics: BenchTopics,
    messages: Sequence[OutboxMessage],
    *,
    batch_size: int,
) -> RelayProfile:
    """One relay in this process (shipped publisher), under cProfile, draining `messages`."""
    prefix = "profile"
    await topics.for_run(prefix)
    config = OutboxRelayConfig(batch_size=batch_size, lease_seconds=3)
    profiler = cProfile.Profile()
    with executor_for(config) as executor:
        publishers = confluent_publisher_factory(
            stack.kafka_bootstrap, client_id="bench-profile", executor=executor
        )
        relay = OutboxRelay(
            schema.pool,
            schema.name,
            publishers,
            owner="bench-relay-profile",
            config=config,
            names=KafkaNames(f"{prefix}."),
        )
        stop = asyncio.Event()
        task = asyncio.create_task(relay.run(stop))
        try:
            await wait_split(schema, 1)
            xid = await insert_in_one_transaction(schema, messages)
            started_at = time.perf_counter()
            profiler.enable()
            await wait_all_passed(schema, xid)
            profiler.disable()
            wall = time.perf_counter() - started_at
        finally:
            stop.set()
            await task
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.strip_dirs().sort_stats("tottime").print_stats(PROFILE_TOP_FUNCTIONS)
    by_area = _by_area(pstats.Stats(profiler))
    return RelayProfile(
        batch_size=batch_size,
        published=len(messages),
        wall_seconds=wall,
        profiled_seconds=sum(by_area.values()),
        by_area=by_area,
        top_functions=text.getvalue(),
    )
