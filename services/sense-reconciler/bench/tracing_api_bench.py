"""One side of the tracing benchmark's API figure (`python -m bench.tracing`): Sense's `POST /v1/devices`,
one request after the other, in a process of its own, traced or not.

    .venv/bin/python services/sense-reconciler/bench/tracing_api_bench.py [--otlp-endpoint URL]
        [--requests 1500] [--warm-up 100]

Sense runs as `serve` wires it (sense_bench_harness: the Control API in process over ASGI with a private
Hydra's access tokens, the outbox relay to Kafka, the device consumer and the reconciler against a private
MediaMTX). With `--otlp-endpoint` the process first traces as `serve` does with
``SENSE_TRACING_OTLP_ENDPOINT`` set: `configure_tracing` (sampling ratio 1.0, the default; asyncpg and httpx
instrumented) and `instrument_app` on the app. The tracer provider is global to a process, so the benchmark
runs this script once per side.

Each request creates an enabled device on a site of its own 16 (the per-site limit): the API span, the
device's transaction with its outbox rows, the reconciler woken. The warm-up requests are not timed. Prints
one line `TRACING_API_JSON {...}`: the requests, how many answered 201, and the latencies (ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import asyncpg
from fastapi import FastAPI
from sense_bench_harness import identity_provider_for_bench, mediamtx_binary, sense_under_test

from sense_reconciler.entrypoints.main import SPEC
from yovision_platform.localstack import LocalStack
from yovision_platform.observability import configure_tracing, instrument_app
from yovision_platform.settings import TRACING_SAMPLING_RATIO_DEFAULT
from yovision_platform.tools.bench_runner import run_cleanly
from yovision_platform.tools.mediamtx_sandbox import mediamtx_sandbox

REPO_ROOT = Path(__file__).resolve().parents[3]
JSON_PREFIX = "TRACING_API_JSON "
CREATED = 201


async def bench(args: argparse.Namespace) -> dict[str, object]:
    tracing = configure_tracing(
        SPEC.name,
        instance_id="bench",
        version=SPEC.version,
        otlp_endpoint=args.otlp_endpoint,
        sampling_ratio=args.sampling_ratio,
    )

    def instrument(app: FastAPI) -> None:
        if tracing.provider is not None:
            instrument_app(app, tracing.provider)

    stack = LocalStack.load(REPO_ROOT / ".local")
    admin = await asyncpg.connect(stack.admin_dsn)
    devices = args.warm_up + args.requests
    try:
        async with (
            identity_provider_for_bench(stack, args.work_dir) as identity,
            mediamtx_sandbox(mediamtx_binary(REPO_ROOT), args.work_dir, label="tracing-api") as server,
            sense_under_test(stack, admin, [server], "tracing api", identity, on_app=instrument) as sense,
        ):
            sites = await sense.create_sites(devices)
            seconds: list[float] = []
            created = 0
            for n in range(devices):
                body = sense.device_body(sites, n)
                started = time.perf_counter()
                response = await sense.api.post("/v1/devices", json=body)
                elapsed = time.perf_counter() - started
                if n >= args.warm_up:
                    seconds.append(elapsed)
                    created += response.status_code == CREATED
    finally:
        await admin.close()
        await asyncio.to_thread(tracing.shutdown)
    return {"requests": args.requests, "created": created, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--otlp-endpoint", default=None, help="trace into this OTLP/HTTP receiver")
    parser.add_argument("--sampling-ratio", type=float, default=TRACING_SAMPLING_RATIO_DEFAULT)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--warm-up", type=int, default=100)
    parser.add_argument("--work-dir", type=Path, default=REPO_ROOT / ".local" / "run" / "tracing-bench")
    args = parser.parse_args()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    result = run_cleanly(bench(args))
    print(JSON_PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
