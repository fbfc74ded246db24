"""`python -m bench.tracing`: what tracing at the default sampling (ratio 1.0) costs, side by side with
tracing off in one run (issue 27), and the exporter's memory while its collector is down.

1. **Relay throughput**: the relay benchmark's drain (`bench.relay_throughput.run_relays`: one relay process,
   the shipped configuration, `--messages` rows committed in one transaction), in alternating pairs (off, on,
   off, on...). Every row carries a sampled ``traceparent`` of a trace of its own (as rows of distinct API
   requests do: the relay's per-row PRODUCER span, its worst realistic case); the off runs get the same
   rows. The on runs trace into a private Jaeger (`tools.jaeger.private_jaeger`).
2. **API latency**: Sense's `POST /v1/devices` as `serve` wires it
   (services/sense-reconciler/bench/tracing_api_bench.py), `--requests` sequential requests after a warm-up,
   one process per run (the tracer provider is global), in alternating pairs, the on runs into the same
   Jaeger.
3. **Exporter memory, collector down** (`bench.tracing_memory`): 200,000 of the relay's spans at full speed
   with tracing off, into a closed loopback port, and into the Jaeger; RSS before, after the warm-up, at its
   peak and at the end, and each chunk's time.

Figures are medians over the pairs; each ratio is against the off runs of the same benchmark. The machine is
shared: alternating the runs spreads a drifting load over both sides alike.

BenchCounts (a wrong one fails the run, exit 1): every row on the run's topic; in the on runs, no more spans
accepted by Jaeger (its `otelcol_receiver_accepted_spans`, before and after) than rows (fewer is printed as a
finding: spans the exporter's bounded queue dropped, see docs/benchmarks.md); every API request
answered 201 and, when traced, at least one span per request accepted; the RSS growth with the collector
down within MEMORY_GROWTH_BOUND_MIB. Nothing leaves loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from bench.infra import REPO_ROOT, Stack, bench_schema, bench_topics, ensure_stack
from bench.messages import build_messages
from bench.relay_throughput import RelayRun, run_relays
from bench.stats import Latency
from bench.table import Cell, render_table
from bench.tracing_memory import JSON_PREFIX as MEMORY_JSON_PREFIX
from yovision_platform.messaging import OutboxMessage, OutboxRelayConfig
from yovision_platform.observability import TRACEPARENT_HEADER
from yovision_platform.settings import TRACING_SAMPLING_RATIO_DEFAULT
from yovision_platform.tools.bench_runner import BenchCounts, run_cleanly
from yovision_platform.tools.jaeger import PrivateJaeger, private_jaeger
from yovision_platform.tools.localhost import free_port

__all__ = ["main"]

MIN_EXPECTED_TRACES = 10  # at fewer sampled requests expected, none at all is not a wrong count
GOAL_COST = 0.05  # issue 27: at most 5 % of relay throughput and of API p99
MEMORY_GROWTH_BOUND_MIB = 32.0  # the queue holds at most 2,048 spans: a few MiB
DEFAULT_MESSAGES = 50_000
DEFAULT_PAIRS = 3
# A relay run takes about a second and varies by +-15 % from run to run on this machine: more pairs.
DEFAULT_RELAY_PAIRS = 7
DEFAULT_REQUESTS = 1_500
DEFAULT_WARM_UP = 100
DEFAULT_MEMORY_SPANS = 200_000
API_SCRIPT = REPO_ROOT / "services" / "sense-reconciler" / "bench" / "tracing_api_bench.py"
API_JSON_PREFIX = "TRACING_API_JSON "
WORK_DIR = REPO_ROOT / ".local" / "run" / "tracing-bench"
ACCEPTED_METRIC = "otelcol_receiver_accepted_spans"
MIB = 1024 * 1024
JSON_PREFIX = "BENCH_JSON "


def _progress(text: str) -> None:
    print(f"[bench.tracing] {text}", file=sys.stderr, flush=True)


def _side(traced: bool) -> str:
    return "on" if traced else "off"


def accepted_spans(jaeger: PrivateJaeger) -> int:
    """Spans Jaeger's OTLP receivers accepted so far (its collector metric, every transport)."""
    text = httpx.get(f"http://127.0.0.1:{jaeger.metrics_port}/metrics", timeout=5.0).text
    return sum(
        round(float(line.rsplit(" ", 1)[1])) for line in text.splitlines() if line.startswith(ACCEPTED_METRIC)
    )


def with_own_traces(
    messages: Sequence[OutboxMessage], sampled: float, seed: int = 0
) -> tuple[list[OutboxMessage], int]:
    """`messages`, each with a ``traceparent`` of a trace of its own (as the outbox stores it), the share
    `sampled` of them sampled (as the API's sampler decided at that ratio); and how many are."""
    picker = random.Random(seed)
    traced = []
    for m in messages:
        flags = "01" if picker.random() < sampled else "00"
        parent = f"00-{picker.getrandbits(128):032x}-{picker.getrandbits(64):016x}-{flags}"
        traced.append(dataclasses.replace(m, headers=(*m.headers, (TRACEPARENT_HEADER, parent))))
    return traced, sum(1 for m in traced if m.headers[-1][1].endswith("-01"))


@dataclass(frozen=True)
class TracedRelayRun:
    pair: int
    traced: bool
    run: RelayRun
    spans_accepted: int
    sampled_rows: int

    def as_dict(self) -> dict[str, object]:
        return {
            "pair": self.pair,
            "tracing": _side(self.traced),
            **self.run.as_dict(),
            "spans_accepted": self.spans_accepted,
        }


async def relay_pairs(
    stack: Stack, jaeger: PrivateJaeger, args: argparse.Namespace, counts: BenchCounts
) -> list[TracedRelayRun]:
    runs: list[TracedRelayRun] = []
    async with bench_topics(stack) as topics:
        messages, sampled = with_own_traces(build_messages(args.messages, topics.base).outbox, args.sampled)
        for pair in range(args.relay_pairs):
            for traced in (False, True):
                _progress(f"relay pair {pair + 1}/{args.relay_pairs}, tracing {_side(traced)}")
                before = await asyncio.to_thread(accepted_spans, jaeger)
                async with bench_schema(stack, purpose="tracing") as schema:
                    run = await run_relays(
                        stack,
                        schema,
                        topics,
                        messages,
                        relays=1,
                        client="confluent",
                        batch_size=OutboxRelayConfig().batch_size,
                        run_tag=f"-{_side(traced)}{pair}",
                        otlp_endpoint=jaeger.otlp_http_url if traced else None,
                    )
                accepted = await asyncio.to_thread(accepted_spans, jaeger) - before
                counts.expect(f"relay {_side(traced)} {pair}: records on the topic", run.delivered, run.rows)
                # Fewer spans than rows is a finding (the bounded queue dropped them: `relay_report`'s spans
                # line), more is a wrong count (a span twice, or one the run did not make).
                counts.expect(
                    f"relay {_side(traced)} {pair}: spans Jaeger accepted, at most one per sampled row",
                    max(accepted, sampled) if traced else accepted,
                    sampled if traced else 0,
                )
                runs.append(TracedRelayRun(pair, traced, run, accepted, sampled))
    return runs


@dataclass(frozen=True)
class ApiRun:
    pair: int
    traced: bool
    requests: int
    created: int
    latency: Latency
    spans_accepted: int


async def _child(command: Sequence[str], prefix: str) -> dict[str, object]:
    """Run `command` (stderr passed through); the JSON of its stdout line starting with `prefix`."""
    process = await asyncio.create_subprocess_exec(*command, cwd=REPO_ROOT, stdout=asyncio.subprocess.PIPE)
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"{command[1]} exited {process.returncode}")
    line = next(line for line in out.decode().splitlines() if line.startswith(prefix))
    result: dict[str, object] = json.loads(line.removeprefix(prefix))
    return result


async def api_pairs(jaeger: PrivateJaeger, args: argparse.Namespace, counts: BenchCounts) -> list[ApiRun]:
    runs: list[ApiRun] = []
    for pair in range(args.pairs):
        for traced in (False, True):
            _progress(f"API pair {pair + 1}/{args.pairs}, tracing {_side(traced)}")
            before = await asyncio.to_thread(accepted_spans, jaeger)
            tracing = (
                ["--otlp-endpoint", jaeger.otlp_http_url, "--sampling-ratio", str(args.sampled)]
                if traced
                else []
            )
            result = await _child(
                [
                    sys.executable,
                    str(API_SCRIPT),
                    "--requests",
                    str(args.requests),
                    "--warm-up",
                    str(args.warm_up),
                    "--work-dir",
                    str(WORK_DIR),
                    *tracing,
                ],
                API_JSON_PREFIX,
            )
            accepted = await asyncio.to_thread(accepted_spans, jaeger) - before
            seconds = result["seconds"]
            created = result["created"]
            assert isinstance(seconds, list)
            assert isinstance(created, int)
            run = ApiRun(pair, traced, args.requests, created, Latency.of_seconds(seconds), accepted)
            counts.expect(f"API {_side(traced)} {pair}: requests answered 201", created, args.requests)
            if traced and args.sampled == 1.0:  # each request's server span at least, and more
                counts.expect(f"API on {pair}: spans accepted, >= 1 per 201", min(accepted, created), created)
            elif traced and args.sampled * created >= MIN_EXPECTED_TRACES:  # some, by the ratio
                counts.expect(f"API on {pair}: some requests traced", min(accepted, 1), 1)
            runs.append(run)
    return runs


@dataclass(frozen=True)
class MemoryRun:
    variant: str
    spans: int
    base_rss: int
    start_rss: int
    peak_rss: int
    end_rss: int
    chunk: Latency  # per chunk of spans
    chunk_spans: int
    shutdown_seconds: float

    @property
    def growth_mib(self) -> float:
        return (self.peak_rss - self.base_rss) / MIB

    def as_dict(self) -> dict[str, object]:
        return {
            "variant": self.variant,
            "spans": self.spans,
            "rss_mib": {
                k: round(v / MIB, 1)
                for k, v in (
                    ("base", self.base_rss),
                    ("after_warm_up", self.start_rss),
                    ("peak", self.peak_rss),
                    ("end", self.end_rss),
                )
            },
            "growth_mib": round(self.growth_mib, 1),
            "chunk_spans": self.chunk_spans,
            "chunk_ms": self.chunk.as_dict(),
            "shutdown_s": round(self.shutdown_seconds, 2),
        }


async def memory_runs(
    jaeger: PrivateJaeger, args: argparse.Namespace, counts: BenchCounts
) -> list[MemoryRun]:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there: every export is refused
    variants = {
        "off": [],
        "collector down": ["--otlp-endpoint", closed],
        "collector up": ["--otlp-endpoint", jaeger.otlp_http_url],
    }
    runs = []
    for variant, tracing in variants.items():
        _progress(f"exporter memory: {args.memory_spans:,} spans, {variant}")
        result = await _child(
            [sys.executable, "-m", "bench.tracing_memory", "--spans", str(args.memory_spans), *tracing],
            MEMORY_JSON_PREFIX,
        )
        numbers = {k: v for k, v in result.items() if isinstance(v, int | float)}
        chunks = result["chunk_seconds"]
        assert isinstance(chunks, list)
        runs.append(
            MemoryRun(
                variant,
                int(numbers["spans"]),
                int(numbers["base_rss"]),
                int(numbers["start_rss"]),
                int(numbers["peak_rss"]),
                int(numbers["end_rss"]),
                Latency.of_seconds(chunks),
                int(numbers["chunk_spans"]),
                float(numbers["shutdown_seconds"]),
            )
        )
        counts.expect(f"exporter memory {variant}: spans made", runs[-1].spans, args.memory_spans)
    down = runs[1]
    within = down.growth_mib <= MEMORY_GROWTH_BOUND_MIB
    counts.expect(
        f"RSS growth with the collector down within {MEMORY_GROWTH_BOUND_MIB:g} MiB "
        f"({down.growth_mib:.1f} MiB)",
        int(within),
        1,
    )
    return runs


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def _cost(on: float, off: float, *, higher_is_worse: bool) -> float:
    """The share tracing costs: throughput lost, or latency added."""
    if off <= 0:
        return 0.0
    return (on - off) / off if higher_is_worse else (off - on) / off


def _verdict(cost: float) -> str:
    return "met" if cost <= GOAL_COST else "NOT met"


def relay_report(runs: Sequence[TracedRelayRun]) -> tuple[str, dict[str, object]]:
    rows: list[list[Cell]] = [
        [
            f"{_side(r.traced)} (pair {r.pair + 1})",
            r.run.rows,
            r.run.delivered,
            r.spans_accepted if r.traced else "-",
            r.run.wall_seconds,
            r.run.events_per_second,
            r.run.relay_cpu_seconds,
            1e6 * r.run.relay_cpu_seconds / r.run.rows,
        ]
        for r in runs
    ]
    off = _median([r.run.events_per_second for r in runs if not r.traced])
    on = _median([r.run.events_per_second for r in runs if r.traced])
    cpu_off = _median([r.run.relay_cpu_seconds / r.run.rows for r in runs if not r.traced])
    cpu_on = _median([r.run.relay_cpu_seconds / r.run.rows for r in runs if r.traced])
    cost = _cost(on, off, higher_is_worse=False)
    table = render_table(
        "(a) Relay throughput, tracing off vs on (1 relay process, every row its own trace, the --sampled "
        "share of them sampled; on: spans into a private Jaeger)",
        ["run", "rows", "delivered", "spans accepted", "wall s", "rows/s", "relay CPU s", "CPU us/row"],
        rows,
    )
    goal = (
        f"goal: tracing costs <= {GOAL_COST:.0%} of relay throughput -> median {on:,.0f}/s on vs "
        f"{off:,.0f}/s off = {on / off if off else 0:.3f} (cost {cost:.1%}; relay CPU per row "
        f"{1e6 * cpu_on:.1f} vs {1e6 * cpu_off:.1f} us): {_verdict(cost)}"
    )
    traced = [r for r in runs if r.traced]
    made, accepted = sum(r.sampled_rows for r in traced), sum(r.spans_accepted for r in traced)
    goal += (
        f"\nspans: every row's span exported -> {accepted:,} of {made:,} accepted by Jaeger "
        f"({made - accepted:,} dropped by the exporter's bounded queue): "
        f"{'met' if accepted == made else 'NOT met'}"
    )
    summary = {
        "spans_made": made,
        "spans_accepted": accepted,
        "runs": [r.as_dict() for r in runs],
        "median_rows_per_s": {"off": round(off), "on": round(on)},
        "ratio_on_off": round(on / off, 3) if off else 0.0,
        "cost": round(cost, 4),
    }
    return f"{table}\n{goal}", summary


def api_report(runs: Sequence[ApiRun]) -> tuple[str, dict[str, object]]:
    rows: list[list[Cell]] = [
        [
            f"{_side(r.traced)} (pair {r.pair + 1})",
            r.requests,
            r.created,
            r.latency.p50_ms,
            r.latency.p95_ms,
            r.latency.p99_ms,
            r.latency.max_ms,
            f"{r.spans_accepted / r.requests:.1f}" if r.traced else "-",
        ]
        for r in runs
    ]
    medians = {
        side: {
            q: _median([getattr(r.latency, q) for r in runs if r.traced == traced])
            for q in ("p50_ms", "p95_ms", "p99_ms")
        }
        for side, traced in (("off", False), ("on", True))
    }
    cost = _cost(medians["on"]["p99_ms"], medians["off"]["p99_ms"], higher_is_worse=True)
    p50_cost = _cost(medians["on"]["p50_ms"], medians["off"]["p50_ms"], higher_is_worse=True)
    table = render_table(
        "(b) Sense POST /v1/devices, sequential, tracing off vs on (one process per run; ms; spans/request: "
        "all the process's spans Jaeger accepted, relay, consumer and reconciler included)",
        ["run", "requests", "201", "p50", "p95", "p99", "max", "spans/request"],
        rows,
    )
    goal = (
        f"goal: tracing adds <= {GOAL_COST:.0%} to API p99 -> median p99 {medians['on']['p99_ms']:.2f} ms on "
        f"vs {medians['off']['p99_ms']:.2f} ms off (+{cost:.1%}; p50 {medians['on']['p50_ms']:.2f} vs "
        f"{medians['off']['p50_ms']:.2f} ms, +{p50_cost:.1%}): {_verdict(cost)}"
    )
    summary = {
        "runs": [
            {
                "pair": r.pair,
                "tracing": _side(r.traced),
                "created": r.created,
                "spans_accepted": r.spans_accepted,
                **r.latency.as_dict(),
            }
            for r in runs
        ],
        "median_ms": medians,
        "p99_cost": round(cost, 4),
        "p50_cost": round(p50_cost, 4),
    }
    return f"{table}\n{goal}", summary


def memory_report(runs: Sequence[MemoryRun]) -> tuple[str, dict[str, object]]:
    rows: list[list[Cell]] = [
        [
            r.variant,
            r.spans,
            r.base_rss / MIB,
            r.start_rss / MIB,
            r.peak_rss / MIB,
            r.end_rss / MIB,
            r.growth_mib,
            1000 * r.chunk.p50_ms / r.chunk_spans,
            r.chunk.max_ms,
            r.shutdown_seconds,
        ]
        for r in runs
    ]
    table = render_table(
        f"(c) Exporter memory: the relay's span at full speed, {runs[0].spans:,} spans after a warm-up (RSS "
        f"MiB; growth = peak - before the first span; chunks of {runs[0].chunk_spans:,} spans)",
        [
            "variant",
            "spans",
            "RSS before",
            "after warm-up",
            "peak",
            "end",
            "growth",
            "us/span p50",
            "slowest chunk ms",
            "shutdown s",
        ],
        rows,
    )
    down = runs[1]
    goal = (
        f"bound: RSS growth with the collector down <= {MEMORY_GROWTH_BOUND_MIB:g} MiB -> "
        f"{down.growth_mib:.1f} MiB: {'met' if down.growth_mib <= MEMORY_GROWTH_BOUND_MIB else 'NOT met'}"
    )
    return f"{table}\n{goal}", {"runs": [r.as_dict() for r in runs], "bound_mib": MEMORY_GROWTH_BOUND_MIB}


async def bench(args: argparse.Namespace, counts: BenchCounts) -> dict[str, object]:
    stack = ensure_stack()
    summary: dict[str, object] = {}
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    with private_jaeger(WORK_DIR, label="tracing-jaeger") as jaeger:
        if not args.skip_relay:
            text, summary["relay"] = relay_report(await relay_pairs(stack, jaeger, args, counts))
            print(text + "\n", flush=True)
        if not args.skip_api:
            text, summary["api"] = api_report(await api_pairs(jaeger, args, counts))
            print(text + "\n", flush=True)
        if not args.skip_memory:
            text, summary["exporter_memory"] = memory_report(await memory_runs(jaeger, args, counts))
            print(text + "\n", flush=True)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tracing",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--pairs", type=int, default=DEFAULT_PAIRS, help="off/on pairs of the API figure")
    parser.add_argument(
        "--relay-pairs", type=int, default=DEFAULT_RELAY_PAIRS, help="off/on pairs of the relay figure"
    )
    parser.add_argument("--messages", type=int, default=DEFAULT_MESSAGES, help="rows per relay run")
    parser.add_argument("--requests", type=int, default=DEFAULT_REQUESTS, help="timed API requests per run")
    parser.add_argument("--warm-up", type=int, default=DEFAULT_WARM_UP, help="untimed API requests first")
    parser.add_argument("--memory-spans", type=int, default=DEFAULT_MEMORY_SPANS)
    parser.add_argument(
        "--sampled",
        type=float,
        default=TRACING_SAMPLING_RATIO_DEFAULT,
        help="share of sampled rows and the API's sampling ratio (default: the services' default)",
    )
    parser.add_argument("--skip-relay", action="store_true")
    parser.add_argument("--skip-api", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args(argv)
    counts = BenchCounts()
    summary = run_cleanly(bench(args, counts))
    print(JSON_PREFIX + json.dumps({"tracing": summary}), flush=True)
    counts.exit_if_short("bench.tracing")


if __name__ == "__main__":
    main()
