from __future__ import annotations

import pytest
from aiokafka.partitioner import DefaultPartitioner
from confluent_kafka import KafkaError

from yovision_platform.messaging import OutboxRelayConfig, assigned_shards, partition_for_key
from yovision_platform.messaging._txn_producer import PublishError, classify


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
    ("codes", "reason"),
    [
        ([KafkaError._TRANSPORT], PublishError.BROKER_UNAVAILABLE),
        ([KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN], PublishError.BROKER_UNAVAILABLE),
        ([KafkaError.NOT_LEADER_FOR_PARTITION], PublishError.BROKER_UNAVAILABLE),
        ([KafkaError._MSG_TIMED_OUT], PublishError.TIMEOUT),
        ([KafkaError._TIMED_OUT], PublishError.TIMEOUT),
        ([KafkaError.MSG_SIZE_TOO_LARGE], PublishError.REJECTED),
        ([KafkaError._TRANSPORT, KafkaError.PRODUCER_FENCED], PublishError.FENCED),
        ([KafkaError.INVALID_PRODUCER_EPOCH], PublishError.FENCED),
        ([], PublishError.UNKNOWN),
    ],
)
def test_publish_errors_map_to_stable_codes(codes: list[int], reason: PublishError) -> None:
    assert classify([KafkaError(code) for code in codes]) is reason


@pytest.mark.parametrize(("batch_size", "valid"), [(0, False), (1, True), (10_000, True), (10_001, False)])
def test_relay_batch_size_bounds(batch_size: int, valid: bool) -> None:
    if valid:
        assert OutboxRelayConfig(batch_size=batch_size).batch_size == batch_size
    else:
        with pytest.raises(ValueError, match="batch_size"):
            OutboxRelayConfig(batch_size=batch_size)


@pytest.mark.parametrize(("lease", "valid"), [(0.999, False), (1.0, True)])
def test_relay_lease_has_a_floor(lease: float, valid: bool) -> None:
    if valid:
        OutboxRelayConfig(lease_seconds=lease)
    else:
        with pytest.raises(ValueError, match="lease"):
            OutboxRelayConfig(lease_seconds=lease)


@pytest.mark.parametrize(
    ("members", "owner", "expected"),
    [
        ([], "a", {0, 1, 2, 3, 4, 5}),
        (["b"], "a", {0, 2, 4}),
        (["a", "b"], "b", {1, 3, 5}),
        (["a", "b", "c", "d"], "a", {0, 4}),
        (["a", "b", "c", "d"], "d", {3}),
    ],
)
def test_shards_are_split_between_the_live_members(
    members: list[str], owner: str, expected: set[int]
) -> None:
    assert assigned_shards(members, owner, 6) == expected


def test_every_shard_has_exactly_one_member() -> None:
    members = [f"relay-{i}" for i in range(4)]
    owners = [assigned_shards(members, m, 6) for m in members]
    assert sorted(s for shards in owners for s in shards) == list(range(6))
