"""Kafka over SASL_SSL (SCRAM-SHA-512, a private CA), on a private broker (tests/integration/platform/
secure_kafka.py): the settings a service loads reach the outbox relay's librdkafka producer and the
aiokafka consumers; a wrong password and an untrusted CA fail with stable codes and the password shows
nowhere."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg
import pytest
from aiokafka.errors import KafkaConnectionError
from pydantic import SecretStr
from pydantic_settings import SettingsConfigDict

from tests.integration.platform.secure_kafka import SecureBroker, secure_broker
from tests.support.kafka import publish_outbox, wait_until
from tests.support.stack import MigratedSchema, create_topic, free_port
from tests.support.tls import CertificateAuthority
from yovision_platform.messaging import (
    AvroSerde,
    ConfluentPublisher,
    IdempotentConsumer,
    InboundEvent,
    KafkaAccessRefused,
    KafkaConnection,
    Outbox,
    OutboxMessage,
    PositionRestoringListener,
    PublishError,
    PublishFailed,
    SchemaRegistry,
    build_event,
    create_consumer,
    start_client,
    start_producer,
)
from yovision_platform.settings import BaseServiceSettings, Port, load_settings
from yovision_platform.tools.localhost import write_private_file

EVENTS = 5
REFUSAL_TIMEOUT_SECONDS = 5.0


class SecureSettings(BaseServiceSettings):
    model_config = SettingsConfigDict(env_prefix="KSEC_")

    http_port: Port = 18099


@pytest.fixture(scope="module")
async def broker(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SecureBroker]:
    async with secure_broker(tmp_path_factory.mktemp("secure-kafka")) as started:
        yield started


def loaded_settings(broker: SecureBroker, migrated: MigratedSchema, directory: Path) -> SecureSettings:
    """The settings as a service loads them (the password from its secret file)."""
    return load_settings(
        SecureSettings,
        kafka_bootstrap=broker.bootstrap,
        database_dsn_file=write_private_file(directory / "runtime.dsn", migrated.runtime_dsn),
        kafka_security_protocol="sasl_ssl",
        kafka_ssl_ca_file=broker.ca.cert,
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username=broker.username,
        kafka_sasl_password_file=broker.password_file,
    )


async def test_the_relay_publishes_and_an_idempotent_consumer_consumes_over_sasl_ssl(
    broker: SecureBroker, runtime_pool: asyncpg.Pool, migrated: MigratedSchema, tmp_path: Path
) -> None:
    kafka = loaded_settings(broker, migrated, tmp_path).kafka
    topic = f"test.{uuid.uuid4().hex[:10]}.v1"
    await create_topic(kafka, topic, partitions=3)
    serde = AvroSerde(SchemaRegistry.load())
    events = [
        build_event(
            serde, "SmokeTestEvent", f"run-{i}", {"run_id": f"run-{i}", "produced_by": "t", "note": ""}
        )
        for i in range(EVENTS)
    ]
    outbox = Outbox(migrated.name)
    async with runtime_pool.acquire() as conn, conn.transaction():
        for event in events:
            await outbox.enqueue(
                conn,
                OutboxMessage(
                    event.event_id, event.event_type, topic, event.key, event.value, event.text_headers
                ),
            )
    await publish_outbox(runtime_pool, migrated.name, kafka)

    applied: set[uuid.UUID] = set()

    async def apply(_conn: asyncpg.Connection, event: InboundEvent) -> None:
        applied.add(event.event_id)

    idempotent = IdempotentConsumer(
        runtime_pool, migrated.name, consumer_group="secure-g1", decode=serde.decode, handler=apply
    )
    consumer = create_consumer(kafka, group_id="secure-g1", client_id="secure-consumer")
    consumer.subscribe([topic], listener=PositionRestoringListener(consumer, idempotent))
    await start_client(consumer, kafka, close=consumer.stop)
    stop = asyncio.Event()
    running = asyncio.create_task(idempotent.run(consumer, stop))
    try:

        async def all_applied() -> bool:
            return len(applied) == EVENTS

        await wait_until(all_applied, timeout_seconds=30)
    finally:
        stop.set()
        await running
        await consumer.stop()
    assert applied == {event.event_id for event in events}


async def refusals(kafka: KafkaConnection) -> tuple[KafkaAccessRefused, PublishFailed]:
    """What an aiokafka producer and the relay's transactional publisher raise against `kafka`."""
    with pytest.raises(KafkaAccessRefused) as aiokafka_refusal:
        await start_producer(kafka, client_id="secure-refused")
    with ThreadPoolExecutor(max_workers=2) as executor:
        publisher = ConfluentPublisher(
            kafka,
            f"secure-refused-{uuid.uuid4().hex[:8]}",
            client_id="secure-refused",
            executor=executor,
            call_timeout_seconds=REFUSAL_TIMEOUT_SECONDS,
        )
        try:
            with pytest.raises(PublishFailed) as confluent_refusal:
                await publisher.start()
        finally:
            await publisher.close()
    return aiokafka_refusal.value, confluent_refusal.value


def assert_nowhere(secret: str, caplog: pytest.LogCaptureFixture, *errors: BaseException) -> None:
    assert secret not in caplog.text
    for record in caplog.records:
        assert secret not in record.getMessage()
        assert secret not in repr(record.args)
    for error in errors:
        assert secret not in str(error)
        assert secret not in repr(error)


async def test_a_wrong_password_is_refused_with_a_stable_code_and_never_shown(
    broker: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "wrong-" + uuid.uuid4().hex
    right = broker.password_file.read_text().strip()
    kafka = broker.connection(sasl_password=SecretStr(wrong))
    caplog.set_level(logging.DEBUG)
    aiokafka_refusal, confluent_refusal = await refusals(kafka)
    assert aiokafka_refusal.code == "kafka_authentication_failed"
    assert confluent_refusal.reason is PublishError.AUTHENTICATION
    assert str(confluent_refusal) == "publish_failed: kafka_authentication_failed"
    for secret in (wrong, right):
        assert_nowhere(secret, caplog, aiokafka_refusal, confluent_refusal)
        assert secret not in repr(kafka)


async def test_a_broker_certificate_from_an_untrusted_ca_is_refused(
    broker: SecureBroker, tmp_path: Path
) -> None:
    stranger = CertificateAuthority.create(tmp_path, "stranger-ca")
    aiokafka_refusal, confluent_refusal = await refusals(broker.connection(ca_file=stranger.cert))
    assert aiokafka_refusal.code == "kafka_tls_failed"
    assert confluent_refusal.reason is PublishError.TLS


async def test_a_broker_certificate_for_another_host_name_is_refused(broker: SecureBroker) -> None:
    """The certificate names 127.0.0.1 only: reaching the same broker as `localhost` fails verification."""
    port = broker.bootstrap.rpartition(":")[2]
    aiokafka_refusal, confluent_refusal = await refusals(
        KafkaConnection(f"localhost:{port}", broker.security())
    )
    assert aiokafka_refusal.code == "kafka_tls_failed"
    assert confluent_refusal.reason is PublishError.TLS


async def test_an_unreachable_broker_stays_a_connection_error_not_a_refusal(broker: SecureBroker) -> None:
    with pytest.raises(KafkaConnectionError):
        await start_producer(KafkaConnection(f"127.0.0.1:{free_port()}", broker.security()), client_id="gone")
