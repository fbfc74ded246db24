from __future__ import annotations

import pytest
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
)
from aiokafka.partitioner import DefaultPartitioner

from yovision_platform.kafka import partition_for_key
from yovision_platform.relay import PublishError, RelayConfig, classify


@pytest.mark.parametrize("partitions", [1, 3, 6, 12, 64])
def test_partition_for_key_matches_the_producers_default_partitioner(partitions: int) -> None:
    all_partitions = list(range(partitions))
    for i in range(2000):
        key = f"device-{i:05d}".encode()
        assert partition_for_key(key, partitions) == DefaultPartitioner()(key, all_partitions, all_partitions)


def test_partition_for_key_refuses_zero_partitions() -> None:
    with pytest.raises(ValueError, match="partitions"):
        partition_for_key(b"k", 0)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (KafkaConnectionError(), PublishError.BROKER_UNAVAILABLE),
        (NotLeaderForPartitionError(), PublishError.BROKER_UNAVAILABLE),
        (KafkaTimeoutError(), PublishError.TIMEOUT),
        (TimeoutError(), PublishError.TIMEOUT),
        (MessageSizeTooLargeError(), PublishError.REJECTED),
        (RuntimeError("boom"), PublishError.UNKNOWN),
    ],
)
def test_publish_errors_map_to_stable_codes(error: BaseException, code: PublishError) -> None:
    assert classify(error) is code


@pytest.mark.parametrize(("batch_size", "valid"), [(0, False), (1, True), (1000, True), (1001, False)])
def test_relay_batch_size_bounds(batch_size: int, valid: bool) -> None:
    if valid:
        assert RelayConfig(batch_size=batch_size).batch_size == batch_size
    else:
        with pytest.raises(ValueError, match="batch_size"):
            RelayConfig(batch_size=batch_size)


@pytest.mark.parametrize(("lease", "valid"), [(5.0, False), (5.001, True)])
def test_relay_lease_must_exceed_the_safety_margin(lease: float, valid: bool) -> None:
    if valid:
        RelayConfig(lease_seconds=lease)
    else:
        with pytest.raises(ValueError, match="lease"):
            RelayConfig(lease_seconds=lease)
