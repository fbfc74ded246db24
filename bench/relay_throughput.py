"""Relay throughput: drain a pre-filled outbox with `OutboxRelay.run_once()` and time it.

The outbox is filled before timing starts. The producer is started (and holds the topic's metadata)
before timing too, as for the raw baseline, so both measure sending, not connecting. A round is one
`run_once()`: claim, publish in per-key waves, settle.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from aiokafka import AIOKafkaProducer

from bench.infra import BenchSchema
from bench.instrumented import PhaseTimes, TimedRelay, TimedSendProducer
from bench.produce import relay_linger, started_producer
from bench.stats import Latency, Stopwatch, per_second
from yovision_platform.relay import OutboxRelay, RelayConfig

__all__ = ["ClaimPlan", "PhaseSummary", "RelayRun", "drain_relay", "explain_claim", "run_relay"]

CONCURRENT_RETRY_SECONDS = 0.001


@dataclass(frozen=True)
class PhaseSummary:
    """Where a drain's wall time went, in seconds summed over all rounds."""

    claim_s: float
    send_calls_s: float
    ack_wait_s: float
    publish_s: float
    settle_s: float
    other_s: float
    waves: int
    mean_waves_per_round: float
    max_waves_per_round: int
    mean_rows_per_wave: float

    @classmethod
    def of(cls, phases: PhaseTimes, send_seconds: float, wall_seconds: float) -> PhaseSummary:
        publish = sum(phases.publish)
        waves = len(phases.wave)
        rounds = len(phases.waves_per_round)
        return cls(
            claim_s=sum(phases.claim),
            send_calls_s=send_seconds,
            ack_wait_s=max(0.0, sum(phases.wave) - send_seconds),
            publish_s=publish,
            settle_s=sum(phases.settle),
            other_s=max(0.0, wall_seconds - sum(phases.claim) - publish - sum(phases.settle)),
            waves=waves,
            mean_waves_per_round=waves / rounds if rounds else 0.0,
            max_waves_per_round=max(phases.waves_per_round, default=0),
            mean_rows_per_wave=sum(phases.wave_rows) / waves if waves else 0.0,
        )

    def as_dict(self) -> dict[str, float]:
        return {name: round(float(value), 4) for name, value in vars(self).items()}


@dataclass(frozen=True)
class ClaimPlan:
    """Server-side cost of one claim statement on the full backlog (EXPLAIN ANALYZE, rolled back), and
    the plan's notable nodes: a Sort, Bitmap Heap Scan or Seq Scan here reads the whole backlog."""

    planning_ms: float
    execution_ms: float
    nodes: str


# Plan nodes worth showing: those whose cost grows with the backlog, and the join strategy.
NOTABLE_PLAN_NODES = frozenset(
    {
        "Sort",
        "Bitmap Heap Scan",
        "Seq Scan",
        "Index Scan",
        "Index Only Scan",
        "Hash Join",
        "Nested Loop",
        "Merge Join",
    }
)


def _plan_nodes(node: Any, found: list[str]) -> list[str]:
    node_type = str(node.get("Node Type", ""))
    if node_type in NOTABLE_PLAN_NODES:
        join = node.get("Join Type")
        label = f"{node_type} ({join})" if join and join != "Inner" else node_type
        index = node.get("Index Name")
        found.append(f"{label} on {index}" if index else label)
    for child in node.get("Plans", []):
        _plan_nodes(child, found)
    return found


@dataclass(frozen=True)
class RelayRun:
    batch_size: int
    relays: int
    # None: the platform's producer settings as shipped; else a what-if linger override.
    producer_linger_ms: int | None
    rows: int
    published: int
    failed: int
    lease_lost: int
    wall_seconds: float
    cpu_seconds: float
    round_latency: Latency
    claim_latency: Latency
    wave_latency: Latency
    settle_latency: Latency
    phases: PhaseSummary
    claim_plan: ClaimPlan

    @property
    def events_per_second(self) -> float:
        return per_second(self.published, self.wall_seconds)

    def as_dict(self) -> dict[str, object]:
        return {
            "batch_size": self.batch_size,
            "relays": self.relays,
            "producer_linger_ms": self.producer_linger_ms,
            "rows": self.rows,
            "published": self.published,
            "failed": self.failed,
            "lease_lost": self.lease_lost,
            "events_per_s": round(self.events_per_second),
            "wall_s": round(self.wall_seconds, 3),
            "cpu_s": round(self.cpu_seconds, 3),
            "round_latency": self.round_latency.as_dict(),
            "claim_latency": self.claim_latency.as_dict(),
            "wave_latency": self.wave_latency.as_dict(),
            "settle_latency": self.settle_latency.as_dict(),
            "phases": self.phases.as_dict(),
            "claim_plan_ms": {
                "planning": self.claim_plan.planning_ms,
                "execution": self.claim_plan.execution_ms,
            },
            "claim_plan_nodes": self.claim_plan.nodes,
        }


@dataclass(frozen=True)
class DrainResult:
    published: int
    failed: int
    lease_lost: int
    round_seconds: list[float]
    # perf_counter() at the end of the last round that claimed rows.
    last_productive_at: float


async def drain_relay(relay: OutboxRelay, *, concurrent: bool = False) -> DrainResult:
    """`run_once()` until a round claims nothing.

    With `concurrent` relays on the schema, an empty claim can also mean "every due key is held by another
    relay", so this relay stops only once the backlog is empty too.
    """
    published = failed = lease_lost = 0
    round_seconds: list[float] = []
    last_productive_at = time.perf_counter()
    while True:
        started = time.perf_counter()
        result = await relay.run_once()
        if result.claimed == 0:
            if not concurrent or await relay.refresh_backlog() == 0:
                break
            await asyncio.sleep(CONCURRENT_RETRY_SECONDS)
            continue
        last_productive_at = time.perf_counter()
        round_seconds.append(last_productive_at - started)
        published += result.published
        failed += result.failed
        lease_lost += result.lease_lost
    return DrainResult(published, failed, lease_lost, round_seconds, last_productive_at)


async def explain_claim(relay: OutboxRelay, schema: BenchSchema, owner: str, batch_size: int) -> ClaimPlan:
    sql: str = relay._claim_sql  # the shipped statement, measured as is
    async with schema.pool.acquire() as conn:
        transaction = conn.transaction()
        await transaction.start()
        try:
            await conn.execute("SET LOCAL enable_bitmapscan = off")  # as OutboxRelay._claim does
            raw = await conn.fetchval(
                f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}",
                owner,
                RelayConfig().lease_seconds,
                batch_size,
                uuid.uuid4(),
            )
        finally:
            await transaction.rollback()
    plan: Any = json.loads(raw) if isinstance(raw, str) else raw
    return ClaimPlan(
        planning_ms=float(plan[0]["Planning Time"]),
        execution_ms=float(plan[0]["Execution Time"]),
        nodes=" > ".join(_plan_nodes(plan[0]["Plan"], [])),
    )


class _BenchRelay:
    """A TimedRelay with its own pre-started, send-timed producer (separate relays own separate producers)."""

    def __init__(
        self,
        schema: BenchSchema,
        producer: TimedSendProducer,
        *,
        bootstrap: str,
        topic: str,
        owner: str,
        batch_size: int,
        linger_ms: int | None,
    ) -> None:
        self.producer = producer
        self._bootstrap = bootstrap
        self._topic = topic
        self._owner = owner
        self._linger_ms = linger_ms
        self._handed_out = False
        config = RelayConfig(batch_size=batch_size)
        self.relay = TimedRelay(schema.pool, schema.name, self._producer_factory, owner=owner, config=config)

    async def _producer_factory(self) -> AIOKafkaProducer:
        # The pre-started producer first; a fresh one only if the relay dropped it after an error.
        if not self._handed_out:
            self._handed_out = True
            return cast(AIOKafkaProducer, self.producer)
        return await started_producer(
            self._bootstrap, self._topic, client_id=self._owner, linger_ms=relay_linger(self._linger_ms)
        )

    async def close(self) -> None:
        await self.relay.close()
        if not self._handed_out:
            await self.producer.stop()


async def _start_relay(
    schema: BenchSchema, bootstrap: str, topic: str, *, owner: str, batch_size: int, linger_ms: int | None
) -> _BenchRelay:
    producer = TimedSendProducer(
        await started_producer(bootstrap, topic, client_id=owner, linger_ms=relay_linger(linger_ms))
    )
    return _BenchRelay(
        schema,
        producer,
        bootstrap=bootstrap,
        topic=topic,
        owner=owner,
        batch_size=batch_size,
        linger_ms=linger_ms,
    )


def _merged(all_phases: Sequence[PhaseTimes]) -> PhaseTimes:
    merged = PhaseTimes()
    for phases in all_phases:
        merged.claim += phases.claim
        merged.publish += phases.publish
        merged.settle += phases.settle
        merged.wave += phases.wave
        merged.wave_rows += phases.wave_rows
        merged.waves_per_round += phases.waves_per_round
    return merged


async def run_relay(
    schema: BenchSchema,
    bootstrap: str,
    topic: str,
    *,
    batch_size: int,
    rows: int,
    relays: int = 1,
    linger_ms: int | None = None,
) -> RelayRun:
    """Drain `schema`'s pre-filled outbox with `relays` concurrent relays (one event loop, one process)."""
    bench_relays: list[_BenchRelay] = []
    try:
        for index in range(relays):
            owner = f"bench-relay-{batch_size}-{index}"
            bench_relays.append(
                await _start_relay(
                    schema, bootstrap, topic, owner=owner, batch_size=batch_size, linger_ms=linger_ms
                )
            )
        claim_plan = await explain_claim(bench_relays[0].relay, schema, "bench-explain", batch_size)
        watch = Stopwatch().start()
        started_at = time.perf_counter()
        drained = await asyncio.gather(*(drain_relay(b.relay, concurrent=relays > 1) for b in bench_relays))
        watch.stop()
    finally:
        for bench_relay in bench_relays:
            await bench_relay.close()
    wall = max(d.last_productive_at for d in drained) - started_at
    phases = _merged([b.relay.phases for b in bench_relays])
    send_seconds = sum(b.producer.send_seconds for b in bench_relays)
    return RelayRun(
        batch_size=batch_size,
        relays=relays,
        producer_linger_ms=linger_ms,
        rows=rows,
        published=sum(d.published for d in drained),
        failed=sum(d.failed for d in drained),
        lease_lost=sum(d.lease_lost for d in drained),
        wall_seconds=wall,
        cpu_seconds=watch.cpu_seconds,
        round_latency=Latency.of_seconds([s for d in drained for s in d.round_seconds]),
        claim_latency=Latency.of_seconds(phases.claim),
        wave_latency=Latency.of_seconds(phases.wave),
        settle_latency=Latency.of_seconds(phases.settle),
        phases=PhaseSummary.of(phases, send_seconds, wall * relays),
        claim_plan=claim_plan,
    )
