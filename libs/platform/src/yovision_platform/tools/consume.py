"""Print a topic's events as JSON lines, decoded with the repo's Avro schemas.

    python -m yovision_platform.tools.consume --topic sense.device.v1 [--from-beginning] [--max N]
        [--idle-timeout S] [--bootstrap HOST:PORT] [--schemas-dir DIR]

One line per message: ``{"topic", "partition", "offset", "key", "event_type", "value"}``; a message that
does not decode prints ``{"topic", "partition", "offset", "key", "error": "<stable code>"}`` instead, and a
tombstone (null value on a compacted topic) prints ``"tombstone": true``.
Reads without a consumer group (commits nothing, disturbs no service), read_committed like every consumer
of the project. Exits 0 after ``--max`` messages or
once no message arrived for ``--idle-timeout`` seconds (0 waits forever); 2 for an unknown topic; 3 when
Kafka is unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from yovision_platform.messaging import AvroSerde, EventContractError, SchemaRegistry, plain_consumer
from yovision_platform.tools import resolve_bootstrap

DEFAULT_IDLE_TIMEOUT_SECONDS = 10.0
POLL_INTERVAL_MS = 500
EXIT_UNKNOWN_TOPIC = 2
EXIT_KAFKA_UNAVAILABLE = 3


def to_jsonable(value: Any) -> Any:
    """Decoded Avro values as JSON: UUIDs as text, timestamps as ISO-8601 UTC with milliseconds."""
    if isinstance(value, dict):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(item) for item in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, bytes):
        return value.hex()
    return value


def message_line(
    serde: AvroSerde, topic: str, partition: int, offset: int, key: bytes | None, value: Any
) -> str:
    line: dict[str, Any] = {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "key": key.decode("utf-8", "replace") if key is not None else None,
    }
    if value is None:  # a tombstone on a compacted topic
        line["tombstone"] = True
        return json.dumps(line, ensure_ascii=False)
    try:
        decoded = serde.decode(value if isinstance(value, bytes) else b"")
    except EventContractError as error:
        line["error"] = error.code
    else:
        line["event_type"] = decoded.event_type
        line["value"] = to_jsonable(decoded.record)
    return json.dumps(line, ensure_ascii=False)


async def consume(args: argparse.Namespace, out: TextIO) -> int:
    serde = AvroSerde(SchemaRegistry.load(args.schemas_dir))
    consumer = plain_consumer(
        resolve_bootstrap(args.bootstrap),
        group_id=None,
        enable_auto_commit=False,
        client_id="yovision-consume",
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        # The relays publish in Kafka transactions: show what consumers see, never an aborted batch.
        isolation_level="read_committed",
    )
    try:
        await consumer.start()
    except KafkaError:
        await consumer.stop()
        print(json.dumps({"error": "kafka_unavailable"}), file=out)
        return EXIT_KAFKA_UNAVAILABLE
    try:
        if args.topic not in await consumer.topics():
            print(json.dumps({"topic": args.topic, "error": "unknown_topic"}), file=out)
            return EXIT_UNKNOWN_TOPIC
        # Without a group there are no committed offsets, so auto_offset_reset alone picks the start.
        consumer.subscribe([args.topic])
        await _print_messages(consumer, serde, args, out)
    finally:
        await consumer.stop()
    return 0


async def _print_messages(
    consumer: AIOKafkaConsumer, serde: AvroSerde, args: argparse.Namespace, out: TextIO
) -> None:
    loop = asyncio.get_running_loop()
    printed = 0
    idle_since = loop.time()
    while args.max is None or printed < args.max:
        remaining = None if args.max is None else args.max - printed
        batches = await consumer.getmany(timeout_ms=POLL_INTERVAL_MS, max_records=remaining)
        if not batches:
            if args.idle_timeout > 0 and loop.time() - idle_since >= args.idle_timeout:
                return
            continue
        for partition in sorted(batches, key=lambda topic_partition: topic_partition.partition):
            for message in batches[partition]:
                line = message_line(
                    serde, message.topic, message.partition, message.offset, message.key, message.value
                )
                print(line, file=out, flush=True)
                printed += 1
        idle_since = loop.time()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m yovision_platform.tools.consume", description=__doc__)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--from-beginning", action="store_true", help="start at the earliest offsets")
    parser.add_argument("--max", type=int, default=None, help="stop after this many messages")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT_SECONDS,
        help="seconds without messages before exiting (0 = never)",
    )
    parser.add_argument("--bootstrap", default=None, help="Kafka bootstrap HOST:PORT")
    parser.add_argument("--schemas-dir", type=Path, default=None, help="schemas/avro directory")
    args = parser.parse_args(argv)
    if args.max is not None and args.max < 1:
        parser.error("--max must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return asyncio.run(consume(args, sys.stdout))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
