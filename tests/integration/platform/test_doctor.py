"""The doctor's secret check can fail: a secret of the environment in a service log or in a Kafka message of
the environment's topics is a finding that names where, never the secret."""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path

from aiokafka import AIOKafkaProducer

from tests.conftest import Stack, create_topic, delete_topic, private_file
from yovision_platform.tools.doctor import examine


def environment(stack: Stack, root: Path, prefix: str) -> str:
    """An environment folder whose only service is bell-receiver under ``prefix``; returns its secret."""
    (root / "stack.env").write_text(
        f"YOVISION_PG_ADMIN_DSN_FILE={stack.admin_dsn_file}\nYOVISION_KAFKA_BOOTSTRAP={stack.kafka_bootstrap}\n"
    )
    secret = secrets.token_hex(32)
    private_file(root / "secrets" / "bell-relay-dev-1.key", secret + "\n")
    (root / "env").mkdir()
    (root / "env" / "bell-receiver.env").write_text(f"BELL_HTTP_PORT=1\nBELL_KAFKA_PREFIX={prefix}\n")
    (root / "logs").mkdir()
    (root / "logs" / "bell-receiver.log").write_text('{"msg": "started"}\n')
    return secret


async def test_a_clean_environment_has_no_secret_finding(stack: Stack, tmp_path: Path) -> None:
    environment(stack, tmp_path, f"doc-{uuid.uuid4().hex[:6]}.")
    assert (await examine(tmp_path, checks=["secrets"])).healthy


async def test_a_secret_in_a_log_is_found_and_not_repeated(stack: Stack, tmp_path: Path) -> None:
    secret = environment(stack, tmp_path, f"doc-{uuid.uuid4().hex[:6]}.")
    with (tmp_path / "logs" / "bell-receiver.log").open("a") as log:
        log.write(f'{{"msg": "oops", "key": "{secret}"}}\n')
    report = await examine(tmp_path, checks=["secrets"])
    assert [(f.check, f.where, f.detail) for f in report.findings] == [
        ("secrets", "bell-receiver", "secret(s) in bell-receiver.log")
    ]
    assert secret not in report.text()


async def test_a_secret_in_a_kafka_message_of_the_environment_is_found(stack: Stack, tmp_path: Path) -> None:
    prefix = f"doc-{uuid.uuid4().hex[:6]}."
    secret = environment(stack, tmp_path, prefix)
    topic = f"{prefix}media.material.v1"
    await create_topic(stack.kafka_bootstrap, topic, partitions=1)
    try:
        producer = AIOKafkaProducer(bootstrap_servers=stack.kafka_bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"value " + secret.encode(), key=b"k")
        finally:
            await producer.stop()
        report = await examine(tmp_path, checks=["secrets"])
        assert [(f.check, f.where) for f in report.findings] == [("secrets", topic)]
    finally:
        await delete_topic(stack.kafka_bootstrap, topic)
