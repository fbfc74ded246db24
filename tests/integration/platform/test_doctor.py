"""The doctor's checks can fail: a secret of the environment in a service log, the identity provider's log,
a Kafka message of the environment's topics or a span in its Jaeger is a finding that names where, never
the secret; so is an identity provider that does not answer, and a service schema that is not migrated."""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest
from aiokafka import AIOKafkaProducer

from tests.integration.platform.conftest import FIXTURE_MIGRATIONS
from tests.support.otlp_traces import post_synthetic_trace
from tests.support.stack import (
    MigratedSchema,
    Stack,
    create_topic,
    delete_topic,
    drop_schema_and_roles,
    free_port,
    migrate_test_schema,
    private_file,
    unique_name,
)
from yovision_platform.storage import Identifier
from yovision_platform.tools import identity_provider
from yovision_platform.tools.doctor import examine, main
from yovision_platform.tools.jaeger import private_jaeger


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


async def test_a_secret_in_a_span_of_the_environments_jaeger_is_found(stack: Stack, tmp_path: Path) -> None:
    secret = environment(stack, tmp_path, f"doc-{uuid.uuid4().hex[:6]}.")
    with private_jaeger(tmp_path / "jaeger") as jaeger:
        with (tmp_path / "stack.env").open("a") as env:
            env.write(f"YOVISION_JAEGER_QUERY_URL={jaeger.query_url}\n")
        # The synthetic trace has a bell-receiver span; its sense-reconciler spans carry the "device id".
        await asyncio.to_thread(post_synthetic_trace, jaeger, secrets.token_hex(16), str(uuid.uuid4()))
        assert (await examine(tmp_path, checks=["secrets"])).healthy
        await asyncio.to_thread(post_synthetic_trace, jaeger, secrets.token_hex(16), secret)
        report = await examine(tmp_path, checks=["secrets"])
    assert [(f.check, f.where, f.detail) for f in report.findings] == [
        ("secrets", "bell-receiver", "secret(s) in spans")
    ]
    assert secret not in report.text()


async def test_the_log_of_a_second_instance_is_scanned_too(stack: Stack, tmp_path: Path) -> None:
    secret = environment(stack, tmp_path, f"doc-{uuid.uuid4().hex[:6]}.")
    (tmp_path / "env" / "bell-receiver@2.env").write_text("BELL_HTTP_PORT=2\n")
    (tmp_path / "logs" / "bell-receiver@2.log").write_text(f'{{"msg": "oops", "key": "{secret}"}}\n')
    report = await examine(tmp_path, checks=["secrets"])
    assert [(f.check, f.where, f.detail) for f in report.findings] == [
        ("secrets", "bell-receiver@2", "secret(s) in bell-receiver@2.log")
    ]


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


async def test_a_schema_not_migrated_is_a_finding_per_service_and_the_other_services_are_still_checked(
    stack: Stack,
    admin_conn: asyncpg.Connection,
    migrated: MigratedSchema,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """orphan-scanner's schema does not exist; bell-receiver's was migrated before the outbox cursors (the
    table is dropped); signal-watcher's is migrated and holds a dead letter. `make doctor` printed a
    traceback at the first missing table; it now reports each unmigrated schema once and goes on."""
    prefix = f"doc-{uuid.uuid4().hex[:6]}."
    environment(stack, tmp_path, prefix)
    missing = unique_name("t")
    await admin_conn.execute(f"DROP TABLE {migrated.name.quoted}.outbox_cursors")
    healthy = Identifier(unique_name("t"))
    await migrate_test_schema(stack, admin_conn, healthy, FIXTURE_MIGRATIONS)
    try:
        await admin_conn.execute(
            f"INSERT INTO {healthy.quoted}.consumer_dead_letters (consumer_group, topic, kafka_partition, "
            "kafka_offset, error_code, payload_digest, value) VALUES ('g', 't', 0, 0, 'undecodable', '', '')"
        )
        env = tmp_path / "env"
        (env / "bell-receiver.env").write_text(
            f"BELL_HTTP_PORT=1\nBELL_KAFKA_PREFIX={prefix}\nBELL_DATABASE_SCHEMA={migrated.name}\n"
        )
        (env / "orphan-scanner.env").write_text(
            f"ORPHAN_HTTP_PORT=1\nORPHAN_KAFKA_PREFIX={prefix}\nORPHAN_DATABASE_SCHEMA={missing}\n"
        )
        (env / "signal-watcher.env").write_text(
            f"SIGNAL_HTTP_PORT=1\nSIGNAL_KAFKA_PREFIX={prefix}\nSIGNAL_DATABASE_SCHEMA={healthy}\n"
        )
        # What `make doctor` runs (its own event loop, so on a thread of its own here).
        code = await asyncio.to_thread(main, ["--env-dir", str(tmp_path), "--wait", "0", "--json"])
    finally:
        await drop_schema_and_roles(admin_conn, healthy)
    out, err = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in out + err
    findings = [(f["check"], f["where"], f["detail"]) for f in json.loads(out)["findings"]]
    assert findings == [
        (
            "schema",
            f"orphan-scanner ({missing})",
            f'schema not migrated: relation "{missing}.consumer_dead_letters" does not exist; '
            "run `orphan-scanner migrate`",
        ),
        (
            "schema",
            f"bell-receiver ({migrated.name})",
            f'schema not migrated: relation "{migrated.name}.outbox_cursors" does not exist; '
            "run `bell-receiver migrate`",
        ),
        ("dead_letters", f"signal-watcher ({healthy})", "consumer_dead_letters group=g code=undecodable"),
    ]
    password = urlsplit(stack.admin_dsn).password
    assert password and password not in out + err


async def test_the_trace_store_and_prometheus_the_environment_names_must_answer(
    stack: Stack, tmp_path: Path
) -> None:
    environment(stack, tmp_path, f"doc-{uuid.uuid4().hex[:6]}.")
    assert (await examine(tmp_path, checks=["observability"])).healthy, "none named: nothing to check"
    with private_jaeger(tmp_path / "jaeger") as jaeger:
        with (tmp_path / "stack.env").open("a") as env:
            env.write(f"YOVISION_JAEGER_QUERY_URL={jaeger.query_url}\n")
        assert (await examine(tmp_path, checks=["observability"])).healthy
        with (tmp_path / "stack.env").open("a") as env:
            env.write(f"YOVISION_PROMETHEUS_URL=http://127.0.0.1:{free_port()}\n")  # nothing listens
        report = await examine(tmp_path, checks=["observability"])
        assert [(f.check, f.where) for f in report.findings] == [("observability", "prometheus")]
    stopped = await examine(tmp_path, checks=["observability"])
    assert [(f.check, f.where) for f in stopped.findings] == [
        ("observability", "jaeger"),
        ("observability", "prometheus"),
    ]
