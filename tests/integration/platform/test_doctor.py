"""The doctor's checks can fail: a secret of the environment in a service log, the identity provider's log or
a Kafka message of the environment's topics is a finding that names where, never the secret; so is an
identity provider that does not answer."""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path

from aiokafka import AIOKafkaProducer

from tests.conftest import Stack, create_topic, delete_topic, private_file
from yovision_platform.tools import identity_provider
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


async def test_an_identity_provider_that_does_not_answer_is_a_finding_and_its_log_is_scanned(
    stack: Stack, tmp_path: Path
) -> None:
    secret = environment(stack, tmp_path, f"doc-{uuid.uuid4().hex[:6]}.")
    dsn = private_file(tmp_path / "secrets" / "identity-provider.dsn", "postgresql://h:pw@127.0.0.1:1/x\n")
    system = private_file(tmp_path / "secrets" / "identity-provider-system.secret", secrets.token_hex(16))
    identity_provider.write_settings(
        tmp_path,
        public_port=1,
        admin_port=1,
        dsn_file=dsn,
        secret_file=system,
        console_url="http://127.0.0.1:1",
    )
    (tmp_path / "logs" / "identity-provider.log").write_text(f'{{"msg": "leaked {secret}"}}\n')
    report = await examine(tmp_path, checks=["identity_provider", "secrets"])
    assert sorted((f.check, f.where) for f in report.findings) == [
        ("identity_provider", "identity-provider"),
        ("secrets", "identity-provider"),
    ]
