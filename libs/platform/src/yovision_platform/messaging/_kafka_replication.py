"""What a Kafka cluster says about its brokers and the replicas of its partitions: read by `make status`
(yovision_platform.tools.kafka_cluster) and `make doctor` (under-replicated partitions, topics with fewer
replicas than the cluster's replication factor)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from yovision_platform.messaging._kafka import admin_client
from yovision_platform.messaging._kafka_security import KafkaTarget

__all__ = [
    "CLUSTER_REPLICATION_FACTOR",
    "PartitionReplicas",
    "Replication",
    "read_leaders",
    "read_replication",
]

# Topics of a cluster of at least this many brokers get this many replicas and min.insync.replicas one less.
CLUSTER_REPLICATION_FACTOR = 3
READ_TIMEOUT_MS = 5000


@dataclass(frozen=True, order=True)
class PartitionReplicas:
    topic: str
    partition: int
    replicas: int
    in_sync: int


@dataclass(frozen=True)
class Replication:
    brokers: frozenset[int]
    partitions: tuple[PartitionReplicas, ...]

    @property
    def wanted_factor(self) -> int:
        """The replication factor the project gives topics on this cluster (create_topics.py)."""
        return CLUSTER_REPLICATION_FACTOR if len(self.brokers) >= CLUSTER_REPLICATION_FACTOR else 1

    def under_replicated(self) -> list[PartitionReplicas]:
        """Partitions with fewer in-sync replicas than replicas (a broker down, or catching up)."""
        return sorted(p for p in self.partitions if p.in_sync < p.replicas)

    def under_factor(self) -> dict[str, int]:
        """Topics with fewer replicas than the cluster's factor (e.g. created with 1 on a cluster of 3), with
        their fewest replicas of a partition."""
        fewest: dict[str, int] = {}
        for p in self.partitions:
            fewest[p.topic] = min(fewest.get(p.topic, p.replicas), p.replicas)
        return {topic: n for topic, n in sorted(fewest.items()) if n < self.wanted_factor}


async def read_replication(kafka: KafkaTarget, topics: Iterable[str] | None = None) -> Replication:
    """The cluster's brokers and the replicas of `topics` (default: every topic, internal ones included)."""
    # Bounded by the client's request timeout, never by cancelling it: a start cancelled while the bootstrap
    # connection waits for its first answer leaves that connection open (aiokafka 0.14 closes it only on
    # an error), as when a node restarts and accepts connections before it answers.
    admin = admin_client(kafka, client_id="yovision-replication", request_timeout_ms=READ_TIMEOUT_MS)
    try:
        await admin.start()
        cluster = await admin.describe_cluster()
        names = sorted(topics) if topics is not None else sorted(await admin.list_topics())
        described = await admin.describe_topics(names) if names else []
    finally:
        await admin.close()
    return Replication(
        frozenset(int(b["node_id"]) for b in cluster["brokers"]),
        tuple(
            PartitionReplicas(t["topic"], p["partition"], len(p["replicas"]), len(p["isr"]))
            for t in described
            if t.get("error_code", 0) == 0
            for p in t["partitions"]
        ),
    )


async def read_leaders(kafka: KafkaTarget, topic: str) -> dict[int, int]:
    """Each partition of `topic` and the node id leading it (-1: none), as the cluster's metadata says (the
    failover tests and benchmarks pick their victim by it)."""
    admin = admin_client(kafka, client_id="yovision-leaders", request_timeout_ms=READ_TIMEOUT_MS)
    try:
        await admin.start()
        [described] = await admin.describe_topics([topic])
    finally:
        await admin.close()
    return {p["partition"]: p["leader"] for p in described["partitions"]}
