"""`make consume` and `make kafka-console-consumer` read committed messages only, as every consumer does:
an aborted relay batch never shows."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess

from confluent_kafka import Producer

from tests.support.stack import REPO_ROOT, Stack
from yovision_platform.tools.consume import consume, parse_args


def committed_and_aborted(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tools-test-{topic}"})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", b"k", partition=0)
    producer.flush(10)
    producer.abort_transaction(10)
    producer.begin_transaction()
    producer.produce(topic, b"committed", b"k", partition=0)
    producer.commit_transaction(10)


async def test_the_consume_tool_and_the_console_consumer_skip_aborted_messages(
    stack: Stack, topic: str
) -> None:
    await asyncio.to_thread(committed_and_aborted, stack.kafka_bootstrap, topic)
    out = io.StringIO()
    args = parse_args(
        ["--topic", topic, "--from-beginning", "--idle-timeout", "3", "--bootstrap", stack.kafka_bootstrap]
    )
    assert await consume(args, out) == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["partition"], line["offset"]) for line in lines] == [(0, 2)], "the committed message only"
    console = await asyncio.to_thread(
        subprocess.run,
        [
            "bash",
            "infra/scripts/kafka-tool.sh",
            "console-consumer",
            "--bootstrap-server",
            stack.kafka_bootstrap,
            "--topic",
            topic,
            "--from-beginning",
            "--timeout-ms",
            "5000",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert console.stdout.split() == ["committed"]
