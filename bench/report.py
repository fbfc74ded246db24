"""The console tables of every benchmark, built from their result objects."""

from __future__ import annotations

from collections.abc import Sequence

from bench.enqueue import EnqueueResult
from bench.leases import CONCURRENT_WORKERS, LeaseRun
from bench.produce import RawBaseline
from bench.relay_latency import PacedRun
from bench.relay_profile import RelayProfile
from bench.relay_throughput import RelayRun
from bench.stats import Latency, per_second
from bench.table import Cell, render_table

__all__ = [
    "RELAY_GOAL_EVENTS_PER_SECOND",
    "RELAY_GOAL_RAW_RATIO",
    "best_shipped",
    "enqueue_table",
    "goal_lines",
    "lease_tables",
    "paced_table",
    "profile_text",
    "relay_tables",
]

# The goal for the relay on 2 cores.
RELAY_GOAL_EVENTS_PER_SECOND = 20_000
RELAY_GOAL_RAW_RATIO = 0.5


def _ratio(value: float, base: float) -> float:
    return value / base if base > 0 else 0.0


def _pcts(latency: Latency) -> list[Cell]:
    return [latency.p50_ms, latency.p95_ms, latency.p99_ms, latency.max_ms]


def _relay_label(run: RelayRun) -> str:
    relays = f" x{run.relays} relays" if run.relays > 1 else ""
    linger = f" linger={run.producer_linger_ms}ms" if run.producer_linger_ms is not None else ""
    return f"relay batch={run.batch_size}{relays}{linger}"


def _share(part: float, whole: float) -> str:
    return f"{part:,.2f} ({100 * _ratio(part, whole):.0f}%)"


def relay_tables(raw: RawBaseline, runs: Sequence[tuple[RelayRun, int]]) -> str:
    rows: list[list[Cell]] = [
        [
            f"raw produce ({label})",
            result.messages,
            gained,
            result.wall_seconds,
            result.events_per_second,
            f"{_ratio(result.events_per_second, raw.events_per_second):.2f}",
            result.cpu_seconds,
            _ratio(result.cpu_seconds, result.wall_seconds),
        ]
        for label, result, gained in raw.runs
    ]
    for run, delivered in runs:
        rows.append(
            [
                _relay_label(run),
                run.published,
                delivered,
                run.wall_seconds,
                run.events_per_second,
                f"{_ratio(run.events_per_second, raw.events_per_second):.2f}",
                run.cpu_seconds,
                _ratio(run.cpu_seconds, run.wall_seconds),
            ]
        )
    throughput = render_table(
        "(a) Outbox relay vs raw aiokafka produce (same messages; idempotent producer, acks=all; "
        "vs raw = against the mean of the raw runs)",
        ["variant", "events", "kafka +msgs", "wall s", "events/s", "vs raw", "py CPU s", "CPU/wall"],
        rows,
    )
    latency_rows: list[list[Cell]] = []
    for run, _ in runs:
        for phase, phase_latency in (
            ("round", run.round_latency),
            ("claim", run.claim_latency),
            ("wave (send+acks)", run.wave_latency),
            ("settle", run.settle_latency),
        ):
            latency_rows.append([f"{_relay_label(run)}: {phase}", phase_latency.count, *_pcts(phase_latency)])
    latency = render_table(
        "(a) Relay round latency, ms (one round = run_once(): claim, publish waves, settle)",
        ["relay / phase", "count", "p50", "p95", "p99", "max"],
        latency_rows,
    )
    breakdown = render_table(
        "(a) Relay time breakdown: seconds summed over relays (share of wall time x relays)",
        [
            "relay",
            "claim",
            "send() calls",
            "ack wait",
            "settle",
            "other",
            "waves/round",
            "rows/wave",
            "claim SQL ms",
        ],
        [
            [
                _relay_label(run),
                _share(run.phases.claim_s, run.wall_seconds * run.relays),
                _share(run.phases.send_calls_s, run.wall_seconds * run.relays),
                _share(run.phases.ack_wait_s, run.wall_seconds * run.relays),
                _share(run.phases.settle_s, run.wall_seconds * run.relays),
                _share(run.phases.other_s, run.wall_seconds * run.relays),
                f"{run.phases.mean_waves_per_round:.1f} (max {run.phases.max_waves_per_round})",
                run.phases.mean_rows_per_wave,
                f"{run.claim_plan.execution_ms:.1f}",
            ]
            for run, _ in runs
        ],
    )
    plans = "\n".join(
        f"claim plan on the full backlog, {_relay_label(run)}: {run.claim_plan.execution_ms:.1f} ms, "
        f"{run.claim_plan.nodes}"
        for run, _ in runs
    )
    return "\n\n".join([throughput, latency, breakdown, plans])


def best_shipped(runs: Sequence[RelayRun]) -> RelayRun:
    """The fastest drain with the platform's settings as shipped (what-if runs excluded)."""
    shipped = [r for r in runs if r.producer_linger_ms is None] or list(runs)
    return max(shipped, key=lambda r: r.events_per_second)


def goal_lines(raw: RawBaseline, runs: Sequence[RelayRun]) -> list[str]:
    best = best_shipped(runs)
    ratio = _ratio(best.events_per_second, raw.events_per_second)
    rate_met = best.events_per_second >= RELAY_GOAL_EVENTS_PER_SECOND
    ratio_met = ratio >= RELAY_GOAL_RAW_RATIO
    return [
        f"goal: relay >= {RELAY_GOAL_EVENTS_PER_SECOND:,} events/s -> best {best.events_per_second:,.0f} "
        f"({_relay_label(best)}): {'met' if rate_met else 'NOT met'}",
        f"goal: relay >= {RELAY_GOAL_RAW_RATIO:.0%} of raw produce -> {ratio:.2f}: "
        f"{'met' if ratio_met else 'NOT met'}",
        *(
            f"what-if (not shipped), {_relay_label(r)}: {r.events_per_second:,.0f} events/s, "
            f"{_ratio(r.events_per_second, raw.events_per_second):.2f} of raw"
            for r in runs
            if r.producer_linger_ms is not None
        ),
    ]


def paced_table(run: PacedRun) -> str:
    return render_table(
        "(a) End-to-end publish latency under a paced load, ms (enqueue commit -> marked published after "
        f"the Kafka ack; relay.run() with batch={run.batch_size}, poll {run.poll_interval_seconds:g}s)",
        ["target/s", "achieved/s", "rows", "unpublished", "p50", "p95", "p99", "max"],
        [[run.target_rate, run.achieved_rate, run.rows, run.unpublished, *_pcts(run.latency)]],
    )


def enqueue_table(results: Sequence[EnqueueResult]) -> str:
    base = next((r for r in results if r.variant == "raw_insert"), results[0])
    return render_table(
        f"(a) Outbox writes: {results[0].transaction_rows} rows per transaction, one connection "
        "(latency = per transaction, ms)",
        ["variant", "rows", "wall s", "rows/s", "vs raw_insert", "p50", "p95", "p99", "max"],
        [
            [
                r.variant,
                r.rows,
                r.wall_seconds,
                r.rows_per_second,
                f"{_ratio(r.rows_per_second, base.rows_per_second):.2f}",
                *_pcts(r.transaction_latency),
            ]
            for r in results
        ],
    )


def lease_tables(runs: Sequence[LeaseRun]) -> str:
    base = next((r for r in runs if r.variant == "raw_locked"), runs[-1])
    rates = render_table(
        f"(b) Lease claim + complete, {CONCURRENT_WORKERS} concurrent workers, "
        f"claim limit {runs[0].claim_limit}",
        ["variant", "jobs", "done", "lease lost", "wall s", "ops/s", "vs raw", "py CPU/wall"],
        [
            [
                r.variant,
                r.jobs,
                r.completed,
                r.lease_lost,
                r.wall_seconds,
                r.ops_per_second,
                f"{_ratio(r.ops_per_second, base.ops_per_second):.2f}",
                _ratio(r.cpu_seconds, r.wall_seconds),
            ]
            for r in runs
        ],
    )
    latency_rows: list[list[Cell]] = []
    for r in runs:
        latency_rows.append([f"{r.variant} claim", r.claim_latency.count, *_pcts(r.claim_latency)])
        latency_rows.append([f"{r.variant} complete", r.complete_latency.count, *_pcts(r.complete_latency)])
        if r.commit_latency.count:
            latency_rows.append([f"{r.variant} commit", r.commit_latency.count, *_pcts(r.commit_latency)])
    latency = render_table(
        "(b) Lease latency per call, ms (claim = one batch; complete = one row; commit = one batch)",
        ["variant / call", "count", "p50", "p95", "p99", "max"],
        latency_rows,
    )
    return f"{rates}\n\n{latency}"


def profile_text(profile: RelayProfile) -> str:
    areas = render_table(
        f"(a) cProfile of a relay drain, batch={profile.batch_size}: own time by area "
        f"({profile.published:,} events, {per_second(profile.published, profile.wall_seconds):,.0f}/s under "
        "the profiler)",
        ["area", "seconds", "share"],
        [
            [area, seconds, f"{100 * _ratio(seconds, profile.profiled_seconds):.0f}%"]
            for area, seconds in profile.by_area.items()
        ],
    )
    return f"{areas}\n\nTop functions by own time:\n{profile.top_functions.strip()}"
