"""The local cluster's layout and node configuration, and what the replication report makes of a cluster's
metadata (yovision_platform.tools.kafka_cluster, yovision_platform.messaging)."""

from __future__ import annotations

from pathlib import Path

from yovision_platform.messaging import PartitionReplicas, Replication
from yovision_platform.tools.kafka_cluster import ClusterLayout, cluster_id, render_config

TEMPLATE = """process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:19093
listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093
log.dirs=@KAFKA_DATA_DIR@
default.replication.factor=1
offsets.topic.replication.factor=1
transaction.state.log.min.isr=1
num.partitions=3
"""


def settings(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            found.setdefault(key, []).append(value)
    return found


def test_nodes_take_ports_a_hundred_apart_and_form_the_quorum() -> None:
    layout = ClusterLayout.from_base_port(Path("/c"), 3, 19092)
    assert [(n.node_id, n.client_port, n.controller_port) for n in layout.nodes] == [
        (1, 19092, 19093),
        (2, 19192, 19193),
        (3, 19292, 19293),
    ]
    assert layout.bootstrap == "127.0.0.1:19092,127.0.0.1:19192,127.0.0.1:19292"
    assert layout.voters == "1@127.0.0.1:19093,2@127.0.0.1:19193,3@127.0.0.1:19293"
    assert layout.min_insync_replicas == 2
    assert ClusterLayout.from_base_port(Path("/c"), 1, 19092).min_insync_replicas == 1


def test_a_nodes_config_replaces_identity_listeners_quorum_and_replication_once_and_keeps_the_rest() -> None:
    layout = ClusterLayout.from_base_port(Path("/c"), 3, 19092)
    config = settings(render_config(layout, layout.node(2), TEMPLATE))
    assert all(len(values) == 1 for values in config.values()), config
    assert config["node.id"] == ["2"]
    assert config["listeners"] == ["PLAINTEXT://127.0.0.1:19192,CONTROLLER://127.0.0.1:19193"]
    assert config["controller.quorum.voters"] == [layout.voters]
    assert "controller.quorum.bootstrap.servers" not in config
    assert config["log.dirs"] == ["/c/node-2/data"]
    for key in ("default.replication.factor", "offsets.topic.replication.factor"):
        assert config[key] == ["3"]
    assert config["min.insync.replicas"] == config["transaction.state.log.min.isr"] == ["2"]
    assert config["process.roles"] == ["broker,controller"] and config["num.partitions"] == ["3"]


def test_a_cluster_id_never_starts_with_a_dash() -> None:
    ids = {cluster_id() for _ in range(500)}
    assert len(ids) == 500 and not any(i.startswith("-") for i in ids)


def test_replication_reports_replicas_out_of_sync_and_topics_under_the_clusters_factor() -> None:
    partitions = (
        PartitionReplicas("a", 0, 3, 3),
        PartitionReplicas("a", 1, 3, 2),
        PartitionReplicas("b", 0, 1, 1),
        PartitionReplicas("b", 1, 3, 3),
    )
    three = Replication(frozenset({1, 2, 3}), partitions)
    assert three.wanted_factor == 3
    assert three.under_replicated() == [PartitionReplicas("a", 1, 3, 2)]
    assert three.under_factor() == {"b": 1}
    single = Replication(frozenset({1}), (PartitionReplicas("b", 0, 1, 1),))
    assert single.wanted_factor == 1 and single.under_factor() == {} and single.under_replicated() == []
