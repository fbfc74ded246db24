"""One outbox relay as its own process, for the multi-relay and client runs of the benchmark.

    BENCH_RUNTIME_DSN=... python -m bench.relay_worker SCHEMA BOOTSTRAP OWNER TOPIC_PREFIX
        [--client confluent|aiokafka] [--batch-size N] [--lease-seconds S] [--otlp-endpoint URL]

Runs `OutboxRelay.run` until SIGTERM, with the shipped settings except those given. The DSN comes from the
environment, never the command line. With `--otlp-endpoint` the process traces as `serve` does with
``<P>_TRACING_OTLP_ENDPOINT`` set (`configure_tracing`, sampling ratio 1.0, the default), and exports what is
still queued before it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from bench.aiokafka_publisher import aiokafka_publisher_factory
from yovision_platform.messaging import (
    KafkaNames,
    OutboxRelay,
    OutboxRelayConfig,
    confluent_publisher_factory,
    executor_for,
)
from yovision_platform.observability import configure_tracing
from yovision_platform.storage import Identifier, create_pool

DSN_ENV = "BENCH_RUNTIME_DSN"
TRACING_SAMPLING_RATIO = 1.0  # the services' default (`tracing_sampling_ratio`)


async def main(args: argparse.Namespace) -> None:
    tracing = configure_tracing(
        "bench-relay",
        instance_id=args.owner,
        version="bench",
        otlp_endpoint=args.otlp_endpoint,
        sampling_ratio=TRACING_SAMPLING_RATIO,
    )
    try:
        await relay(args)
    finally:
        await asyncio.to_thread(tracing.shutdown)


async def relay(args: argparse.Namespace) -> None:
    config = OutboxRelayConfig(batch_size=args.batch_size, lease_seconds=args.lease_seconds)
    pool = await create_pool(os.environ[DSN_ENV], application_name=f"bench-{args.owner}", max_size=8)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        with executor_for(config) as executor:
            if args.client == "aiokafka":
                publishers = aiokafka_publisher_factory(args.bootstrap, client_id=args.owner)
            else:
                publishers = confluent_publisher_factory(
                    args.bootstrap, client_id=args.owner, executor=executor
                )
            relay = OutboxRelay(
                pool,
                Identifier(args.schema),
                publishers,
                owner=args.owner,
                config=config,
                names=KafkaNames(args.topic_prefix),
            )
            await relay.run(stop)
    finally:
        await pool.close()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.relay_worker")
    parser.add_argument("schema")
    parser.add_argument("bootstrap")
    parser.add_argument("owner")
    parser.add_argument("topic_prefix")
    parser.add_argument("--client", choices=("confluent", "aiokafka"), default="confluent")
    parser.add_argument("--batch-size", type=int, default=OutboxRelayConfig().batch_size)
    parser.add_argument("--lease-seconds", type=float, default=OutboxRelayConfig().lease_seconds)
    parser.add_argument("--otlp-endpoint", default=None, help="trace into this OTLP/HTTP receiver")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
