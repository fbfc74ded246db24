"""The exporter's memory while its collector is down: one process, spans at full speed, RSS sampled.

    python -m bench.tracing_memory [--otlp-endpoint URL] [--spans 200000]

Run by `python -m bench.tracing` (in a process of its own: the tracer provider is global). The spans are the
relay's own per-row span, made as `messaging._relay._record_publish_spans` makes it: a PRODUCER span
recorded after the fact, child of a sampled ``traceparent`` of a trace of its own (each row of a distinct
request), so the ParentBased sampler records every one. Without `--otlp-endpoint` tracing is off (no
provider: the API's no-op spans), the baseline. With the endpoint of a closed loopback port, every export
fails: the processor's queue (`EXPORT_QUEUE_MAX_SPANS`) fills and further spans are dropped.

After a warm-up of WARM_UP_SPANS, spans go in chunks of CHUNK_SPANS; after each chunk the process's RSS is
read from /proc. Prints one line `TRACING_MEMORY_JSON {...}`: RSS before the first span, after the warm-up,
at its peak and at the end (bytes), the chunks' durations (seconds: a stall on the dead collector would show
as a long chunk), and how long the provider's shutdown took (it tries to export what is queued).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

from opentelemetry.trace import SpanKind

from yovision_platform.observability import configure_tracing, context_from_headers, record_span, tracer

__all__ = ["JSON_PREFIX", "WARM_UP_SPANS"]

JSON_PREFIX = "TRACING_MEMORY_JSON "
WARM_UP_SPANS = 10_000
CHUNK_SPANS = 1_000
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
TOPIC = "bench.tracing.v1"
ATTRIBUTES = {
    "messaging.system": "kafka",
    "messaging.destination.name": TOPIC,
    "messaging.operation.type": "publish",
}


def rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * PAGE_BYTES


def spans(count: int, picker: random.Random) -> None:
    """`count` of the relay's per-row spans, each in a sampled trace of its own."""
    tracer_ = tracer("yovision_platform.outbox_relay")
    for _ in range(count):
        traceparent = f"00-{picker.getrandbits(128):032x}-{picker.getrandbits(64):016x}-01"
        now = time.time_ns()
        record_span(
            tracer_,
            f"{TOPIC} publish",
            parent=context_from_headers([("traceparent", traceparent)]),
            kind=SpanKind.PRODUCER,
            start_ns=now,
            end_ns=now,
            attributes=ATTRIBUTES,
        )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing_memory", description=__doc__)
    parser.add_argument("--otlp-endpoint", default=None, help="trace into this OTLP/HTTP receiver")
    parser.add_argument("--spans", type=int, default=200_000)
    args = parser.parse_args(argv)
    tracing = configure_tracing(
        "bench-memory",
        instance_id="bench",
        version="bench",
        otlp_endpoint=args.otlp_endpoint,
        sampling_ratio=1.0,
    )
    picker = random.Random(0)
    base_rss = rss_bytes()
    spans(WARM_UP_SPANS, picker)
    start_rss = peak_rss = rss_bytes()
    chunks: list[float] = []
    for _ in range(args.spans // CHUNK_SPANS):
        started = time.perf_counter()
        spans(CHUNK_SPANS, picker)
        chunks.append(time.perf_counter() - started)
        peak_rss = max(peak_rss, rss_bytes())
    end_rss = rss_bytes()
    started = time.perf_counter()
    tracing.shutdown()
    result = {
        "spans": len(chunks) * CHUNK_SPANS,
        "chunk_spans": CHUNK_SPANS,
        "base_rss": base_rss,
        "start_rss": start_rss,
        "peak_rss": peak_rss,
        "end_rss": end_rss,
        "chunk_seconds": chunks,
        "shutdown_seconds": time.perf_counter() - started,
    }
    print(JSON_PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
