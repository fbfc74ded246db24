"""`python -m bench`: run every benchmark on the real local stack, print tables and one BENCH_JSON line.

Order: build the messages; raw produce; the three outbox write variants (each into its own fresh schema,
which then serves as a pre-filled outbox); one relay drain per batch size and one with concurrent relays;
the paced end-to-end latency run; a cProfile'd relay drain (--no-profile skips it); the lease variants.
Progress goes to stderr, results to stdout. Details: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import sys
from collections.abc import Sequence

from bench.enqueue import EnqueueResult, outbox_writer, raw_executemany_writer, raw_insert_writer, run_enqueue
from bench.infra import BENCH_TOPIC_PARTITIONS, BenchSchema, Stack, bench_schema, bench_topic, ensure_stack
from bench.leases import LEASE_VARIANTS, LeaseRun, run_lease_variant
from bench.messages import BENCH_KEY_COUNT, MessageSet, build_messages
from bench.produce import ProduceResult, RawBaseline, raw_produce, topic_message_count, warm_up_topic
from bench.relay_latency import run_paced
from bench.relay_profile import profile_relay
from bench.relay_throughput import RelayRun, run_relay
from bench.report import (
    RELAY_GOAL_EVENTS_PER_SECOND,
    RELAY_GOAL_RAW_RATIO,
    best_shipped,
    enqueue_table,
    goal_lines,
    lease_tables,
    paced_table,
    profile_text,
    relay_tables,
)
from bench.stats import per_second
from yovision_platform.kafka import PRODUCER_LINGER_MS
from yovision_platform.relay import RELAY_BATCH_MAX_ROWS
from yovision_platform.tools.bench_runner import run_cleanly

__all__ = ["main"]

DEFAULT_MESSAGES = 50_000
DEFAULT_BATCH_SIZES = (500, 1000)
DEFAULT_CONCURRENT_RELAYS = 2
DEFAULT_ALT_LINGER_MS = PRODUCER_LINGER_MS  # what-if: the default producer linger
DEFAULT_PACED_RATE_PER_SECOND = 2_000
DEFAULT_PACED_SECONDS = 5.0
DEFAULT_LEASE_JOBS = 10_000
DEFAULT_LEASE_CLAIM_LIMIT = 100
QUICK_MESSAGES = 5_000
QUICK_LEASE_JOBS = 2_000
QUICK_PACED_SECONDS = 2.0
JSON_PREFIX = "BENCH_JSON "


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--messages", type=int, default=DEFAULT_MESSAGES, help="events per relay/produce run")
    parser.add_argument(
        "--batch-sizes",
        default=",".join(map(str, DEFAULT_BATCH_SIZES)),
        help="comma-separated relay batch sizes, one single-relay drain each",
    )
    parser.add_argument(
        "--concurrent-relays",
        type=int,
        default=DEFAULT_CONCURRENT_RELAYS,
        help="relays of one extra drain (largest batch size) running side by side; 1 disables it",
    )
    parser.add_argument(
        "--alt-linger-ms",
        type=int,
        default=DEFAULT_ALT_LINGER_MS,
        help="producer linger of one extra what-if drain (largest batch size); -1 disables it",
    )
    parser.add_argument("--keys", type=int, default=BENCH_KEY_COUNT, help="distinct message keys")
    parser.add_argument("--paced-rate", type=float, default=DEFAULT_PACED_RATE_PER_SECOND, help="events/s")
    parser.add_argument("--paced-seconds", type=float, default=DEFAULT_PACED_SECONDS)
    parser.add_argument(
        "--paced-poll-seconds",
        type=float,
        default=None,
        help="relay poll interval of the paced run (default: RelayConfig's)",
    )
    parser.add_argument("--lease-jobs", type=int, default=DEFAULT_LEASE_JOBS, help="jobs per lease variant")
    parser.add_argument("--lease-claim-limit", type=int, default=DEFAULT_LEASE_CLAIM_LIMIT)
    parser.add_argument("--skip-relay", action="store_true", help="skip benchmark (a)")
    parser.add_argument("--skip-leases", action="store_true", help="skip benchmark (b)")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile'd relay drain")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run of the harness")
    args = parser.parse_args(argv)
    args.batch_sizes = [int(b) for b in str(args.batch_sizes).split(",") if b.strip()]
    if not args.batch_sizes:
        parser.error("--batch-sizes needs at least one value")
    if any(not 1 <= b <= RELAY_BATCH_MAX_ROWS for b in args.batch_sizes):
        parser.error(f"relay batch sizes must be within 1..{RELAY_BATCH_MAX_ROWS}")
    if args.quick:
        args.messages = min(args.messages, QUICK_MESSAGES)
        args.lease_jobs = min(args.lease_jobs, QUICK_LEASE_JOBS)
        args.paced_seconds = min(args.paced_seconds, QUICK_PACED_SECONDS)
    return args


def _ratio(value: float, base: float) -> float:
    return round(value / base, 3) if base > 0 else 0.0


def _progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def _emit(text: str) -> None:
    print(text, flush=True)
    print(flush=True)


WRITERS = {
    "outbox_enqueue": outbox_writer,
    "raw_insert": raw_insert_writer,
    "raw_executemany": raw_executemany_writer,
}


async def _outbox_writes(
    stack: Stack, cleanup: contextlib.AsyncExitStack, messages: MessageSet
) -> tuple[list[BenchSchema], list[EnqueueResult]]:
    """Each write variant fills its own fresh schema; the filled schemas then serve the relay drains."""
    schemas: list[BenchSchema] = []
    results: list[EnqueueResult] = []
    for variant, writer in WRITERS.items():
        schema = await cleanup.enter_async_context(bench_schema(stack, purpose=variant))
        schemas.append(schema)
        _progress(f"outbox writes: {variant}")
        results.append(await run_enqueue(variant, schema.pool, writer(schema.name), messages.outbox))
    return schemas, results


async def _relay_drains(
    stack: Stack,
    cleanup: contextlib.AsyncExitStack,
    args: argparse.Namespace,
    topic: str,
    messages: MessageSet,
    filled: list[BenchSchema],
) -> list[tuple[RelayRun, int]]:
    """One drain per batch size, one with concurrent relays, one with another producer linger; returns
    (run, messages the topic gained)."""
    largest = max(args.batch_sizes)
    # None = the producer the services' relay uses (linger RELAY_PRODUCER_LINGER_MS).
    plans: list[tuple[int, int, int | None]] = [(b, 1, None) for b in args.batch_sizes]
    if args.concurrent_relays > 1:
        plans.append((largest, args.concurrent_relays, None))
    if args.alt_linger_ms >= 0:
        plans.append((largest, 1, args.alt_linger_ms))
    runs: list[tuple[RelayRun, int]] = []
    for index, (batch_size, relays, linger_ms) in enumerate(plans):
        if index < len(filled):
            schema = filled[index]
        else:
            schema = await cleanup.enter_async_context(bench_schema(stack, purpose="relay"))
            await run_enqueue("prefill", schema.pool, raw_executemany_writer(schema.name), messages.outbox)
        linger = "" if linger_ms is None else f", producer linger {linger_ms} ms"
        _progress(f"relay drain, batch={batch_size}, relays={relays}{linger}")
        before = await topic_message_count(stack.kafka_bootstrap, topic, BENCH_TOPIC_PARTITIONS)
        run = await run_relay(
            schema,
            stack.kafka_bootstrap,
            topic,
            batch_size=batch_size,
            rows=len(messages.outbox),
            relays=relays,
            linger_ms=linger_ms,
        )
        after = await topic_message_count(stack.kafka_bootstrap, topic, BENCH_TOPIC_PARTITIONS)
        runs.append((run, after - before))
    return runs


def _run_key(run: RelayRun) -> str:
    linger = "" if run.producer_linger_ms is None else f"_linger{run.producer_linger_ms}"
    return f"batch{run.batch_size}_relays{run.relays}{linger}"


async def _raw_run(
    stack: Stack, topic: str, messages: MessageSet, label: str
) -> tuple[str, ProduceResult, int]:
    _progress(f"raw aiokafka produce ({label} the relay drains)")
    before = await topic_message_count(stack.kafka_bootstrap, topic, BENCH_TOPIC_PARTITIONS)
    result = await raw_produce(stack.kafka_bootstrap, messages.for_kafka())
    after = await topic_message_count(stack.kafka_bootstrap, topic, BENCH_TOPIC_PARTITIONS)
    return label, result, after - before


def _relay_summary(raw: RawBaseline, runs: list[tuple[RelayRun, int]]) -> dict[str, object]:
    best = best_shipped([run for run, _ in runs])
    return {
        "raw_produce": raw.as_dict(),
        "relay": {
            _run_key(run): {
                **run.as_dict(),
                "kafka_delivered": delivered,
                "vs_raw": _ratio(run.events_per_second, raw.events_per_second),
            }
            for run, delivered in runs
        },
        "relay_goal": {
            "best_batch_size": best.batch_size,
            "best_relays": best.relays,
            "best_events_per_s": round(best.events_per_second),
            "vs_raw": _ratio(best.events_per_second, raw.events_per_second),
            "target_events_per_s": RELAY_GOAL_EVENTS_PER_SECOND,
            "target_vs_raw": RELAY_GOAL_RAW_RATIO,
            "met": best.events_per_second >= RELAY_GOAL_EVENTS_PER_SECOND
            and best.events_per_second >= RELAY_GOAL_RAW_RATIO * raw.events_per_second,
        },
    }


async def _relay_benchmark(stack: Stack, args: argparse.Namespace, summary: dict[str, object]) -> None:
    async with contextlib.AsyncExitStack() as cleanup:
        topic = await cleanup.enter_async_context(bench_topic(stack))
        _progress(f"building {args.messages:,} events over {args.keys:,} keys with build_event")
        messages = build_messages(args.messages, topic, key_count=args.keys)
        paced_rows = int(args.paced_rate * args.paced_seconds)
        paced = build_messages(paced_rows, topic, key_count=args.keys, seed=1) if paced_rows else None
        _emit(_messages_line(messages))
        summary["messages"] = {
            "count": len(messages.outbox),
            "distinct_keys": messages.distinct_keys,
            "mean_value_bytes": round(messages.mean_value_bytes, 1),
            "build_event_per_s": round(per_second(len(messages.outbox), messages.build_seconds)),
        }

        await warm_up_topic(stack.kafka_bootstrap, topic, BENCH_TOPIC_PARTITIONS)
        raw_before = await _raw_run(stack, topic, messages, "before")
        filled, enqueue_results = await _outbox_writes(stack, cleanup, messages)
        runs = await _relay_drains(stack, cleanup, args, topic, messages, filled)
        raw = RawBaseline([raw_before, await _raw_run(stack, topic, messages, "after")])
        _emit(relay_tables(raw, runs))
        _emit("\n".join(goal_lines(raw, [run for run, _ in runs])))
        summary.update(_relay_summary(raw, runs))

        if paced is not None:
            _progress(f"paced end-to-end latency: {args.paced_rate:,.0f}/s for {args.paced_seconds:g}s")
            paced_run = await run_paced(
                filled[0],
                stack.kafka_bootstrap,
                topic,
                paced.outbox,
                rate=args.paced_rate,
                poll_interval_seconds=args.paced_poll_seconds,
            )
            _emit(paced_table(paced_run))
            summary["relay_paced"] = paced_run.as_dict()

        _emit(enqueue_table(enqueue_results))
        by_variant = {r.variant: r for r in enqueue_results}
        summary["enqueue"] = {
            **{r.variant: r.as_dict() for r in enqueue_results},
            "outbox_vs_raw_insert": _ratio(
                by_variant["outbox_enqueue"].rows_per_second, by_variant["raw_insert"].rows_per_second
            ),
        }

        if not args.no_profile:
            schema = await cleanup.enter_async_context(bench_schema(stack, purpose="profile"))
            await run_enqueue("prefill", schema.pool, raw_executemany_writer(schema.name), messages.outbox)
            batch_size = max(args.batch_sizes)
            _progress(f"cProfile of a relay drain, batch={batch_size}")
            profile = await profile_relay(schema, stack.kafka_bootstrap, topic, batch_size=batch_size)
            _emit(profile_text(profile))
            summary["relay_profile"] = {
                "batch_size": profile.batch_size,
                "events_per_s_under_profiler": round(profile.events_per_second),
                "seconds_by_area": {k: round(v, 3) for k, v in profile.by_area.items()},
            }
        _progress("dropping the bench schemas and topic")


async def _lease_benchmark(stack: Stack, args: argparse.Namespace, summary: dict[str, object]) -> None:
    async with bench_schema(stack, purpose="leases") as schema:
        runs: list[LeaseRun] = []
        for variant in LEASE_VARIANTS:
            _progress(f"leases: {variant}")
            runs.append(
                await run_lease_variant(
                    variant, schema, jobs=args.lease_jobs, claim_limit=args.lease_claim_limit
                )
            )
    _emit(lease_tables(runs))
    base = next(r for r in runs if r.variant == "raw_locked")
    summary["leases"] = {
        **{r.variant: r.as_dict() for r in runs},
        **{
            f"{r.variant}_vs_raw": round(r.ops_per_second / base.ops_per_second, 3)
            for r in runs
            if r is not base and base.ops_per_second
        },
    }


def _messages_line(messages: MessageSet) -> str:
    return (
        f"messages: {len(messages.outbox):,} SmokeTestEvent (Avro single-object), {messages.distinct_keys:,} "
        f"distinct keys, mean value {messages.mean_value_bytes:.0f} bytes; build_event: "
        f"{per_second(len(messages.outbox), messages.build_seconds):,.0f} events/s (one core)"
    )


async def _run(args: argparse.Namespace) -> dict[str, object]:
    stack = ensure_stack()
    summary: dict[str, object] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine()},
    }
    _emit(
        f"yovision benchmarks, {summary['date']}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        "shared stack: figures are noisy"
    )
    if not args.skip_relay:
        await _relay_benchmark(stack, args, summary)
    if not args.skip_leases:
        await _lease_benchmark(stack, args, summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    args = _parse_args(argv)
    summary = run_cleanly(_run(args))
    print(JSON_PREFIX + json.dumps(summary, separators=(",", ":"), sort_keys=True), flush=True)
