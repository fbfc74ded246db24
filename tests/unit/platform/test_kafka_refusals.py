"""A broker's refusal is a configuration fault with a stable code: librdkafka's errors classify into the
publisher's reasons, and the process shell logs `KafkaAccessRefused` by its code, without a traceback."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError

from tests.unit.platform.supervision import supervise_failing
from yovision_platform.messaging import KafkaAccessRefused
from yovision_platform.messaging._txn_producer import PublishError, classify


@pytest.mark.parametrize(
    ("codes", "reason"),
    [
        ([KafkaError._AUTHENTICATION], PublishError.AUTHENTICATION),
        ([KafkaError.SASL_AUTHENTICATION_FAILED], PublishError.AUTHENTICATION),
        ([KafkaError._SSL], PublishError.TLS),
        ([KafkaError._TIMED_OUT, KafkaError._AUTHENTICATION], PublishError.AUTHENTICATION),  # the cause wins
        ([KafkaError._ALL_BROKERS_DOWN, KafkaError._SSL], PublishError.TLS),
        ([KafkaError._FENCED, KafkaError._AUTHENTICATION], PublishError.FENCED),
    ],
)
def test_refusals_classify_before_unavailability_and_timeouts(codes: list[int], reason: PublishError) -> None:
    assert classify([KafkaError(code) for code in codes]) is reason


async def test_the_supervisor_logs_a_refusal_by_its_code_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="yovision_platform.service")
    assert await supervise_failing(monkeypatch, KafkaAccessRefused("kafka_authentication_failed"), 1) == 2
    (record,) = [
        r for r in caplog.records if r.name == "yovision_platform.service" and r.levelno >= logging.WARNING
    ]
    assert record.levelno == logging.ERROR
    assert record.error_code == "kafka_authentication_failed"  # type: ignore[attr-defined]
    assert record.exc_info is None
