"""What fails a transaction of `ConfluentPublisher`: a delivery failure does, a report of the client's own
(error_cb: a broker connection lost while a commit goes through) does not. The relay once failed, and so
published again, every batch committed while a broker was down (hundreds of read_committed duplicates per
leader kill in tests/cluster)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import KafkaError, KafkaException

from yovision_platform.messaging._txn_producer import (
    ConfluentPublisher,
    PublishError,
    PublishFailed,
    classify,
)


class CommittingProducer:
    """A librdkafka producer whose commit succeeds after `report` ran on librdkafka's side."""

    def __init__(self, report: Callable[[], None]) -> None:
        self._report = report

    def begin_transaction(self) -> None:
        pass

    def produce(self, *args: object, **kwargs: object) -> None:
        pass

    def poll(self, timeout: float) -> int:
        return 0

    def commit_transaction(self, timeout: float) -> None:
        self._report()


async def commit_with(report_kind: str) -> None:
    with ThreadPoolExecutor(max_workers=1) as executor:
        publisher = ConfluentPublisher("127.0.0.1:9", "txn-test", client_id="test", executor=executor)
        publisher._loop = asyncio.get_running_loop()  # as `start` sets it, without a broker

        def report() -> None:  # on the executor thread, as librdkafka's callbacks run
            if report_kind == "client":
                publisher._on_client_error(KafkaError(KafkaError._TRANSPORT))
            else:
                publisher._on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT), None)  # type: ignore[arg-type]

        publisher._producer = CommittingProducer(report)  # type: ignore[assignment]
        publisher.begin()
        publisher.send("topic", b"value", b"key", [])
        await publisher.commit()


async def test_a_client_report_during_a_commit_that_went_through_does_not_fail_it() -> None:
    await commit_with("client")


async def test_a_delivery_failure_reported_with_a_commit_fails_it_for_good() -> None:
    with pytest.raises(PublishFailed) as failed:
        await commit_with("delivery")
    assert failed.value.fatal and failed.value.reason is PublishError.TIMEOUT


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.CONCURRENT_TRANSACTIONS,
        KafkaError.NOT_COORDINATOR,
    ],
)
def test_a_cluster_short_of_replicas_or_its_coordinator_is_unavailable_not_a_rejection(code: int) -> None:
    """Two brokers of three down, or a coordinator finishing the last transaction after a failover: the
    relay backs off under `broker_unavailable` (it once said `message_rejected`)."""
    assert classify([KafkaError(code)]) is PublishError.BROKER_UNAVAILABLE


class FlakyCommitProducer(CommittingProducer):
    """A commit whose first answer is `first` (raised), and whose next one succeeds."""

    def __init__(self, first: KafkaError) -> None:
        super().__init__(lambda: None)
        self.first: KafkaError | None = first
        self.commits = 0
        self.aborts = 0

    def commit_transaction(self, timeout: float) -> None:
        self.commits += 1
        if self.first is not None:
            error, self.first = self.first, None
            raise KafkaException(error)

    def abort_transaction(self, timeout: float) -> None:
        self.aborts += 1


async def commit_through(producer: FlakyCommitProducer) -> None:
    with ThreadPoolExecutor(max_workers=1) as executor:
        publisher = ConfluentPublisher("127.0.0.1:9", "txn-test", client_id="test", executor=executor)
        publisher._loop = asyncio.get_running_loop()
        publisher._producer = producer  # type: ignore[assignment]
        publisher.begin()
        publisher.send("topic", b"value", b"key", [])
        await publisher.commit()


async def test_a_commit_whose_answer_was_lost_is_asked_again_not_aborted() -> None:
    """A retriable commit error (the request timed out, the coordinator moved): the same transaction is
    committed by a second call, so the relay does not abort it and publish the batch again."""
    producer = FlakyCommitProducer(KafkaError(KafkaError._TIMED_OUT, retriable=True))
    await commit_through(producer)
    assert (producer.commits, producer.aborts) == (2, 0)


@pytest.mark.parametrize(
    "error",
    [
        KafkaError(KafkaError._TIMED_OUT, retriable=True, txn_requires_abort=True),
        KafkaError(KafkaError.PRODUCER_FENCED, fatal=True),
        KafkaError(KafkaError.INVALID_TXN_STATE),
    ],
    ids=["requires-abort", "fatal", "not-retriable"],
)
async def test_a_commit_that_must_be_aborted_fails_at_once(error: KafkaError) -> None:
    producer = FlakyCommitProducer(error)
    with pytest.raises(PublishFailed):
        await commit_through(producer)
    assert producer.commits == 1
