"""`python -m bench`: every platform benchmark on the real local stack; tables and one BENCH_JSON line.

Order: build the messages; raw produce with aiokafka and confluent-kafka; Kafka's ProducerPerformance on the
same broker; the three outbox write variants; relay drains (1 relay on confluent-kafka and on aiokafka, then
2 and 4 relay processes); raw produce again; paced end-to-end latency (2,000/s and 10,000/s); a cProfile'd
relay drain; the outbox size after 1,000,000 events under a held snapshot; the lease variants. Every relay
run gets its own schema and topic. Progress goes to stderr, results to stdout. Details: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from collections.abc import Sequence

from bench.enqueue import (
    EnqueueResult,
    outbox_many_writer,
    outbox_writer,
    raw_executemany_writer,
    raw_insert_writer,
    run_enqueue,
)
from bench.infra import BENCH_TOPIC_PARTITIONS, BenchTopics, Stack, bench_schema, bench_topics, ensure_stack
from bench.leases import LEASE_VARIANTS, LeaseRun, run_lease_variant
from bench.messages import BENCH_KEY_COUNT, MessageSet, build_messages
from bench.outbox_bloat import run_bloat
from bench.produce import ProduceResult, count_records, raw_aiokafka, raw_confluent, warm_up_topic
from bench.producer_perf import PerfRun, producer_performance
from bench.relay_latency import PacedRun, run_paced
from bench.relay_profile import profile_relay
from bench.relay_throughput import RelayRun, run_relays
from bench.report import (
    bloat_table,
    enqueue_table,
    goal_lines,
    lease_tables,
    paced_table,
    profile_text,
    relay_table,
)
from bench.stats import per_second
from yovision_platform.messaging import RELAY_BATCH_MAX_ROWS, OutboxRelayConfig
from yovision_platform.tools.bench_runner import BenchCounts, run_cleanly

__all__ = ["main"]

DEFAULT_MESSAGES = 50_000
DEFAULT_RELAY_COUNTS = (1, 2, 4)
DEFAULT_PACED_RATES = (2_000, 10_000)
DEFAULT_PACED_SECONDS = 5.0
DEFAULT_PERF_RECORDS = 500_000
DEFAULT_BLOAT_EVENTS = 1_000_000
DEFAULT_BLOAT_HOLD_SECONDS = 60.0
DEFAULT_LEASE_JOBS = 10_000
DEFAULT_LEASE_CLAIM_LIMIT = 100
QUICK_MESSAGES = 5_000
QUICK_PERF_RECORDS = 50_000
QUICK_BLOAT_EVENTS = 20_000
QUICK_BLOAT_HOLD_SECONDS = 5.0
QUICK_LEASE_JOBS = 2_000
QUICK_PACED_SECONDS = 2.0
JSON_PREFIX = "BENCH_JSON "
CLUSTER_FLAG = "--cluster"


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--messages", type=int, default=DEFAULT_MESSAGES, help="events per relay/produce run")
    parser.add_argument("--keys", type=int, default=BENCH_KEY_COUNT, help="distinct message keys")
    parser.add_argument(
        "--batch-size", type=int, default=OutboxRelayConfig().batch_size, help="relay batch rows"
    )
    parser.add_argument(
        "--relays", default=",".join(map(str, DEFAULT_RELAY_COUNTS)), help="relay process counts to run"
    )
    parser.add_argument("--paced-rates", default=",".join(map(str, DEFAULT_PACED_RATES)), help="events/s")
    parser.add_argument("--paced-seconds", type=float, default=DEFAULT_PACED_SECONDS)
    parser.add_argument("--perf-records", type=int, default=DEFAULT_PERF_RECORDS, help="ProducerPerformance")
    parser.add_argument("--bloat-events", type=int, default=DEFAULT_BLOAT_EVENTS)
    parser.add_argument("--bloat-hold-seconds", type=float, default=DEFAULT_BLOAT_HOLD_SECONDS)
    parser.add_argument("--lease-jobs", type=int, default=DEFAULT_LEASE_JOBS, help="jobs per lease variant")
    parser.add_argument("--lease-claim-limit", type=int, default=DEFAULT_LEASE_CLAIM_LIMIT)
    parser.add_argument("--skip-relay", action="store_true", help="skip the relay benchmarks")
    parser.add_argument("--skip-bloat", action="store_true", help="skip the 1,000,000-event size run")
    parser.add_argument("--skip-leases", action="store_true", help="skip the lease benchmark")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile'd relay drain")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run of the harness")
    parser.add_argument(
        CLUSTER_FLAG,
        action="store_true",
        help="instead: the cluster benchmark on a private three-broker cluster (bench/cluster.py; its "
        "options: python -m bench --cluster --help)",
    )
    args = parser.parse_args(argv)
    args.relays = [int(r) for r in str(args.relays).split(",") if r.strip()]
    args.paced_rates = [float(r) for r in str(args.paced_rates).split(",") if r.strip()]
    if not 1 <= args.batch_size <= RELAY_BATCH_MAX_ROWS:
        parser.error(f"--batch-size must be within 1..{RELAY_BATCH_MAX_ROWS}")
    if args.quick:
        args.messages = min(args.messages, QUICK_MESSAGES)
        args.perf_records = min(args.perf_records, QUICK_PERF_RECORDS)
        args.bloat_events = min(args.bloat_events, QUICK_BLOAT_EVENTS)
        args.bloat_hold_seconds = min(args.bloat_hold_seconds, QUICK_BLOAT_HOLD_SECONDS)
        args.lease_jobs = min(args.lease_jobs, QUICK_LEASE_JOBS)
        args.paced_seconds = min(args.paced_seconds, QUICK_PACED_SECONDS)
    return args


def _progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def _emit(text: str) -> None:
    print(text, flush=True)
    print(flush=True)


WRITERS = {
    "outbox_enqueue": outbox_writer,
    "outbox_enqueue_many": outbox_many_writer,
    "raw_insert": raw_insert_writer,
    "raw_executemany": raw_executemany_writer,
}


async def _raw_runs(
    stack: Stack, topics: BenchTopics, messages: MessageSet, label: str
) -> list[ProduceResult]:
    results = []
    for client, produce in (("aiokafka", raw_aiokafka), ("confluent", raw_confluent)):
        _progress(f"raw {client} produce ({label} the relay drains)")
        topic = await topics.create(f"raw-{client}-{label}.{topics.base}")
        await warm_up_topic(stack.kafka_bootstrap, topic, BENCH_TOPIC_PARTITIONS)
        result = await produce(stack.kafka_bootstrap, topic, messages.for_kafka(topic))
        warm_ups = BENCH_TOPIC_PARTITIONS  # one record per partition, before the run
        on_topic = await count_records(
            stack.kafka_bootstrap, topic, BENCH_TOPIC_PARTITIONS, expected=result.messages + warm_ups
        )
        delivered = on_topic - warm_ups
        results.append(
            ProduceResult(
                f"{result.label} ({label})",
                result.messages,
                result.failed,
                result.wall_seconds,
                result.cpu_seconds,
                delivered,
            )
        )
    return results


async def _perf_runs(stack: Stack, topics: BenchTopics, args: argparse.Namespace, size: int) -> list[PerfRun]:
    runs = []
    for transactional in (False, True):
        topic = await topics.create(f"perf-{'txn' if transactional else 'idem'}.{topics.base}")
        _progress(f"ProducerPerformance, {args.perf_records:,} records, transactional={transactional}")
        runs.append(
            await producer_performance(
                stack.kafka_bootstrap,
                topic,
                records=args.perf_records,
                record_size=size,
                transactional=transactional,
            )
        )
    return runs


async def _enqueue_runs(stack: Stack, messages: MessageSet) -> list[EnqueueResult]:
    results = []
    for variant, writer in WRITERS.items():
        async with bench_schema(stack, purpose=variant) as schema:
            _progress(f"outbox writes: {variant}")
            results.append(
                await run_enqueue(
                    variant, schema.pool, writer(schema.name), messages.outbox, schema=schema.name
                )
            )
    return results


async def _relay_runs(
    stack: Stack, topics: BenchTopics, args: argparse.Namespace, messages: MessageSet
) -> list[RelayRun]:
    plans = [(1, "confluent"), (1, "aiokafka")] + [(n, "confluent") for n in args.relays if n > 1]
    runs = []
    for relays, client in plans:
        async with bench_schema(stack, purpose=f"relay-{relays}") as schema:
            _progress(f"relay drain: {relays} relay process(es), {client}, batch {args.batch_size}")
            runs.append(
                await run_relays(
                    stack,
                    schema,
                    topics,
                    messages.outbox,
                    relays=relays,
                    client=client,
                    batch_size=args.batch_size,
                )
            )
    return runs


async def _paced_runs(
    stack: Stack, topics: BenchTopics, args: argparse.Namespace, messages: MessageSet
) -> list[PacedRun]:
    runs = []
    for rate in args.paced_rates:
        rows = min(len(messages.outbox), int(rate * args.paced_seconds))
        async with bench_schema(stack, purpose="paced") as schema:
            _progress(f"paced end-to-end latency: {rate:,.0f}/s for {rows / rate:g} s")
            runs.append(await run_paced(stack, schema, topics, messages.outbox[:rows], rate=rate))
    return runs


async def _audit_push_benchmark(
    stack: Stack, args: argparse.Namespace, summary: dict[str, object], counts: BenchCounts
) -> None:
    async with bench_topics(stack) as topics:
        _progress(f"building {args.messages:,} events over {args.keys:,} keys with build_event")
        messages = build_messages(args.messages, topics.base, key_count=args.keys)
        _emit(_messages_line(messages))
        summary["messages"] = {
            "count": len(messages.outbox),
            "distinct_keys": messages.distinct_keys,
            "mean_value_bytes": round(messages.mean_value_bytes, 1),
        }
        raw = await _raw_runs(stack, topics, messages, "before")
        perf = await _perf_runs(stack, topics, args, round(messages.mean_value_bytes))
        enqueue = await _enqueue_runs(stack, messages)
        runs = await _relay_runs(stack, topics, args, messages)
        raw += await _raw_runs(stack, topics, messages, "after")
        paced = await _paced_runs(stack, topics, args, messages)
        for r in raw:
            counts.expect(f"{r.label}: sends that failed", r.failed, 0)
            counts.expect(f"{r.label}: records on the topic", r.delivered, r.messages)
        for p in perf:
            counts.expect(f"{p.label}: records", p.records, args.perf_records)
        for run in runs:
            counts.expect(f"{run.label}: records on the topic", run.delivered, run.rows)
        for written in enqueue:
            counts.expect(f"outbox writes {written.variant}: rows stored", written.stored, written.rows)
        for paced_run in paced:
            counts.expect(
                f"paced {paced_run.target_rate:,.0f}/s: records received", paced_run.received, paced_run.rows
            )
        _emit(relay_table(raw, perf, runs))
        _emit(paced_table(paced))
        _emit("\n".join(goal_lines(perf, runs, paced)))
        _emit(enqueue_table(enqueue))
        summary["raw_produce"] = {r.label: r.as_dict() for r in raw}
        summary["producer_performance"] = {p.label: p.as_dict() for p in perf}
        summary["relay"] = {r.label: r.as_dict() for r in runs}
        summary["relay_paced"] = [p.as_dict() for p in paced]
        summary["enqueue"] = {r.variant: r.as_dict() for r in enqueue}
        if not args.no_profile:
            async with bench_schema(stack, purpose="profile") as schema:
                _progress(f"cProfile of a relay drain, batch={args.batch_size}")
                profile = await profile_relay(
                    stack, schema, topics, messages.outbox, batch_size=args.batch_size
                )
            _emit(profile_text(profile))
            summary["relay_profile"] = {
                "events_per_s_under_profiler": round(profile.events_per_second),
                "seconds_by_area": {k: round(v, 3) for k, v in profile.by_area.items()},
            }
        if not args.skip_bloat:
            async with bench_schema(stack, purpose="bloat") as schema:
                _progress(
                    f"outbox size: {args.bloat_events:,} events, snapshot held {args.bloat_hold_seconds:g} s"
                )
                bloat = await run_bloat(
                    stack, schema, topics, events=args.bloat_events, hold_seconds=args.bloat_hold_seconds
                )
            _emit(bloat_table(bloat))
            summary["outbox_bloat"] = bloat.as_dict()
        _progress("dropping the bench schemas and topics")


async def _lease_benchmark(
    stack: Stack, args: argparse.Namespace, summary: dict[str, object], counts: BenchCounts
) -> None:
    async with bench_schema(stack, purpose="leases") as schema:
        runs: list[LeaseRun] = []
        for variant in LEASE_VARIANTS:
            _progress(f"leases: {variant}")
            runs.append(
                await run_lease_variant(
                    variant, schema, jobs=args.lease_jobs, claim_limit=args.lease_claim_limit
                )
            )
    for run in runs:
        counts.expect(f"leases {run.variant}: jobs completed", run.completed, run.jobs)
    _emit(lease_tables(runs))
    summary["leases"] = {r.variant: r.as_dict() for r in runs}


def _messages_line(messages: MessageSet) -> str:
    return (
        f"messages: {len(messages.outbox):,} SmokeTestEvent (Avro single-object), {messages.distinct_keys:,} "
        f"distinct keys, mean value {messages.mean_value_bytes:.0f} bytes; build_event: "
        f"{per_second(len(messages.outbox), messages.build_seconds):,.0f} events/s (one core)"
    )


async def _run(args: argparse.Namespace, counts: BenchCounts) -> dict[str, object]:
    stack = ensure_stack()
    summary: dict[str, object] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine()},
        "load_average_at_start": os.getloadavg(),
    }
    _emit(
        f"yovision benchmarks, {summary['date']}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average at start {os.getloadavg()[0]:.2f}; shared stack: figures are noisy"
    )
    if not args.skip_relay:
        await _audit_push_benchmark(stack, args, summary, counts)
    if not args.skip_leases:
        await _lease_benchmark(stack, args, summary, counts)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if CLUSTER_FLAG in arguments:
        from bench import cluster  # imports this module (JSON_PREFIX): only here, not at the top

        arguments.remove(CLUSTER_FLAG)
        cluster.main(arguments)
        return
    args = _parse_args(arguments)
    counts = BenchCounts()
    summary = run_cleanly(_run(args, counts))
    summary["short_counts"] = counts.short
    print(JSON_PREFIX + json.dumps(summary, separators=(",", ":"), sort_keys=True), flush=True)
    counts.exit_if_short("bench")
