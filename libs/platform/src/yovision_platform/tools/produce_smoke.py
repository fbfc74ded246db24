"""Publish one ``SmokeTestEvent`` to ``platform.smoke.v1`` and print its event id.

    python -m yovision_platform.tools.produce_smoke [--bootstrap HOST:PORT] [--note TEXT] [--schemas-dir DIR]

stdout: the event id alone (easy to capture in a script); stderr: one JSON line with topic, partition,
offset and run id. Exit 3 when Kafka is unreachable or does not acknowledge in time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from aiokafka.errors import KafkaError

from yovision_platform.messaging import AvroSerde, EventRecord, SchemaRegistry, build_event, start_producer
from yovision_platform.tools import resolve_bootstrap

SMOKE_EVENT_TYPE = "SmokeTestEvent"
SMOKE_SOURCE_SYSTEM = "platform"
PRODUCED_BY = "yovision_platform.tools.produce_smoke"
PUBLISH_TIMEOUT_SECONDS = 30.0
EXIT_KAFKA_UNAVAILABLE = 3


def build_smoke_event(serde: AvroSerde, note: str | None = None) -> EventRecord:
    run_id = str(uuid.uuid4())
    payload = {"run_id": run_id, "produced_by": PRODUCED_BY, "note": note}
    return build_event(serde, SMOKE_EVENT_TYPE, run_id, payload, SMOKE_SOURCE_SYSTEM)


async def produce(bootstrap: str, schemas_dir: Path | None, note: str | None) -> int:
    record = build_smoke_event(AvroSerde(SchemaRegistry.load(schemas_dir)), note)
    try:
        async with asyncio.timeout(PUBLISH_TIMEOUT_SECONDS):
            producer = await start_producer(bootstrap, client_id="yovision-produce-smoke")
            try:
                metadata = await producer.send_and_wait(
                    record.topic, record.value, key=record.key, headers=list(record.headers)
                )
            finally:
                await producer.stop()
    except (KafkaError, TimeoutError):
        print(json.dumps({"error": "kafka_unavailable"}), file=sys.stderr)
        return EXIT_KAFKA_UNAVAILABLE
    print(record.event_id)
    details = {
        "topic": metadata.topic,
        "partition": metadata.partition,
        "offset": metadata.offset,
        "run_id": record.key.decode("utf-8"),
    }
    print(json.dumps(details), file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m yovision_platform.tools.produce_smoke", description=__doc__
    )
    parser.add_argument("--bootstrap", default=None, help="Kafka bootstrap HOST:PORT")
    parser.add_argument("--note", default=None, help="free text stored in the event (never secrets)")
    parser.add_argument("--schemas-dir", type=Path, default=None, help="schemas/avro directory")
    args = parser.parse_args(argv)
    return asyncio.run(produce(resolve_bootstrap(args.bootstrap), args.schemas_dir, args.note))


if __name__ == "__main__":
    sys.exit(main())
