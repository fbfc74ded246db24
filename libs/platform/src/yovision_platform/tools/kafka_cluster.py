"""A KRaft Kafka cluster of N combined controller + broker nodes on loopback, from the stack's Kafka jars
(`.local/kafka/libs`) and its base configuration (`infra/kafka/server.properties`).

`make up KAFKA_BROKERS=3` runs it through `infra/scripts/stack.sh`; `tests/cluster` starts private ones on
free ports. Each node has its own data directory, log and pid file; the nodes are the controller quorum
(static voters). Topics default to replication factor N and `min.insync.replicas` N - 1 (2 of 3), and so
do the internal topics (`__consumer_offsets`, `__transaction_state`), so a cluster of 3 takes writes with
one node down and refuses `acks=all` writes (NOT_ENOUGH_REPLICAS) with two down.

Usage: python -m yovision_platform.tools.kafka_cluster up|down|status --dir DIR [--nodes 3]
       [--base-port 19092] [--kafka-home .local/kafka] [--config infra/kafka/server.properties]
Node n listens for clients on base + 100 (n - 1) and for the quorum on the port after it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from yovision_platform.messaging import Replication, read_replication

__all__ = ["ClusterLayout", "KafkaCluster", "Node"]

HOST = "127.0.0.1"
PORT_STRIDE = 100
START_TIMEOUT_SECONDS = 180.0
STOP_TIMEOUT_SECONDS = 60.0
JAVA_OPTS = (
    "-Xms192m",
    "-Xmx384m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:ParallelGCThreads=1",
    "-XX:ConcGCThreads=1",
    "-XX:CICompilerCount=2",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
# The JIT's first tier only, for a short-lived tool, and for nodes that start and stop many times while
# carrying few records (`quick_start`: tests/cluster). There, C2's compiles at every start were about half
# of the nodes' CPU (a `perf` profile of `make test`); the failover tests took a third less CPU with C1
# alone. Its code runs slower at a high rate, so the benchmark and `make up` keep both tiers.
QUICK_START_JAVA_OPTS = ("-XX:TieredStopAtLevel=1",)
# Keys of the single-node template that each node of a cluster sets for itself.
REPLACED_KEYS = (
    "node.id",
    "listeners",
    "advertised.listeners",
    "controller.quorum.bootstrap.servers",
    "controller.quorum.voters",
    "log.dirs",
    "default.replication.factor",
    "min.insync.replicas",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
)


@dataclass(frozen=True)
class Node:
    node_id: int
    client_port: int
    controller_port: int
    directory: Path

    @property
    def address(self) -> str:
        return f"{HOST}:{self.client_port}"

    @property
    def config_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def pid_file(self) -> Path:
        return self.directory / "kafka.pid"


@dataclass(frozen=True)
class ClusterLayout:
    directory: Path
    nodes: tuple[Node, ...]

    @classmethod
    def on_ports(cls, directory: Path, ports: Sequence[tuple[int, int]]) -> ClusterLayout:
        """Node n (from 1) on `ports[n - 1]` = (client port, controller port)."""
        nodes = tuple(
            Node(n, client, controller, directory / f"node-{n}")
            for n, (client, controller) in enumerate(ports, start=1)
        )
        return cls(directory, nodes)

    @classmethod
    def from_base_port(cls, directory: Path, count: int, base_port: int) -> ClusterLayout:
        ports = [(base_port + PORT_STRIDE * i, base_port + PORT_STRIDE * i + 1) for i in range(count)]
        return cls.on_ports(directory, ports)

    @property
    def bootstrap(self) -> str:
        return ",".join(node.address for node in self.nodes)

    @property
    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{HOST}:{n.controller_port}" for n in self.nodes)

    @property
    def min_insync_replicas(self) -> int:
        return max(1, len(self.nodes) - 1)

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id - 1]


def render_config(layout: ClusterLayout, node: Node, template: str) -> str:
    """The single-node template with this node's identity, listeners, quorum and the cluster's replication."""
    kept = [
        line for line in template.splitlines() if not line.startswith(tuple(f"{k}=" for k in REPLACED_KEYS))
    ]
    size, min_isr = len(layout.nodes), layout.min_insync_replicas
    return "\n".join(
        [
            *kept,
            f"# Cluster of {size} ({layout.directory}): node {node.node_id}",
            f"node.id={node.node_id}",
            f"listeners=PLAINTEXT://{HOST}:{node.client_port},CONTROLLER://{HOST}:{node.controller_port}",
            f"advertised.listeners=PLAINTEXT://{HOST}:{node.client_port},CONTROLLER://{HOST}:{node.controller_port}",
            f"controller.quorum.voters={layout.voters}",
            f"log.dirs={node.data_dir}",
            f"default.replication.factor={size}",
            f"min.insync.replicas={min_isr}",
            f"offsets.topic.replication.factor={size}",
            f"transaction.state.log.replication.factor={size}",
            f"transaction.state.log.min.isr={min_isr}",
            f"share.coordinator.state.topic.replication.factor={size}",
            f"share.coordinator.state.topic.min.isr={min_isr}",
            "",
        ]
    )


def cluster_id() -> str:
    """16 random bytes in base64url, as `kafka-storage.sh random-uuid`, never with a leading "-" (the storage
    tool would read it as an option)."""
    while (candidate := secrets.token_urlsafe(16)).startswith("-"):
        pass
    return candidate


class KafkaCluster:
    """Start, stop, signal and inspect the nodes of one layout (processes of their own sessions)."""

    def __init__(
        self, layout: ClusterLayout, *, kafka_home: Path, template: Path, quick_start: bool = False
    ) -> None:
        self.layout = layout
        self._node_java_opts = (*JAVA_OPTS, *QUICK_START_JAVA_OPTS) if quick_start else JAVA_OPTS
        self._libs = kafka_home / "libs"
        self._template = template
        self._config_dir = template.parent
        # The nodes this object started: their state comes from the child itself (reaped once it exits).
        # Nodes another invocation started (`stack.sh down` after `up`) are found by their pid files.
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    def _java(self, *args: str, log4j: str, options: Sequence[str]) -> list[str]:
        config = f"-Dlog4j2.configurationFile={self._config_dir / log4j}"
        return ["java", *options, config, "-cp", f"{self._libs}/*", *args]

    def prepare(self) -> None:
        """Write every node's configuration and format its storage once (one cluster id for all)."""
        id_file = self.layout.directory / "cluster.id"
        self.layout.directory.mkdir(parents=True, exist_ok=True)
        if not id_file.exists():
            id_file.write_text(cluster_id() + "\n")
        cid = id_file.read_text().strip()
        template = self._template.read_text()
        for node in self.layout.nodes:
            for folder in (node.data_dir, node.log_dir):
                folder.mkdir(parents=True, exist_ok=True)
            node.config_file.write_text(render_config(self.layout, node, template))
            if (node.data_dir / "meta.properties").exists():
                continue
            formatted = subprocess.run(
                self._java("kafka.tools.StorageTool", "format", "--ignore-formatted", "-t", cid,
                           "-c", str(node.config_file), log4j="tools-log4j2.xml",
                           options=(*JAVA_OPTS, *QUICK_START_JAVA_OPTS)),
                check=False, capture_output=True, text=True, timeout=START_TIMEOUT_SECONDS,
            )  # fmt: skip
            if formatted.returncode != 0:
                raise RuntimeError(
                    f"formatting node {node.node_id} failed: {formatted.stderr.strip()[-500:]}"
                )

    def pid(self, node: Node) -> int | None:
        """The node's live process id, or None (never started, or its process is gone)."""
        child = self._children.get(node.node_id)
        if child is not None:
            return child.pid if child.poll() is None else None
        try:
            pid = int(node.pid_file.read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, ValueError, IndexError):
            return None
        return pid if b"kafka.Kafka" in cmdline and state != "Z" else None

    def start(self, node: Node) -> None:
        if self.pid(node) is not None:
            return
        with (node.log_dir / "kafka.out").open("ab") as out:
            child = subprocess.Popen(
                self._java(f"-Dkafka.logs.dir={node.log_dir}", "kafka.Kafka", str(node.config_file),
                           log4j="log4j2.xml", options=self._node_java_opts),
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self._children[node.node_id] = child
        node.pid_file.write_text(f"{child.pid}\n")

    def _gone(self, node: Node, *, within: float) -> bool:
        """Wait up to `within` seconds for the node's process to end (reaping it when it is ours)."""
        deadline = time.monotonic() + within
        while self.pid(node) is not None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def send(self, node: Node, sig: signal.Signals) -> None:
        """Send `sig` to the node's process group (the broker and nothing else), if it runs."""
        pid = self.pid(node)
        if pid is not None:
            os.killpg(pid, sig)

    def stop(self, node: Node, *, within: float = STOP_TIMEOUT_SECONDS) -> None:
        """SIGTERM (a controlled shutdown: leadership moves first), then SIGKILL after `within` seconds."""
        pid = self.pid(node)
        if pid is not None:
            os.killpg(pid, signal.SIGCONT)  # a stopped (SIGSTOP) node cannot act on SIGTERM
            os.killpg(pid, signal.SIGTERM)
            if not self._gone(node, within=within):
                self.kill(node)
        node.pid_file.unlink(missing_ok=True)
        self._children.pop(node.node_id, None)

    def kill(self, node: Node) -> None:
        """SIGKILL and wait until the process is gone."""
        pid = self.pid(node)
        if pid is not None:
            os.killpg(pid, signal.SIGKILL)
            self._gone(node, within=STOP_TIMEOUT_SECONDS)

    def up(self) -> None:
        self.prepare()
        for node in self.layout.nodes:
            self.start(node)

    def down(self, *, graceful: bool = True) -> None:
        """Every node: SIGTERM to all at once (their shutdowns overlap), SIGKILL to any still running after
        STOP_TIMEOUT_SECONDS; with `graceful=False` SIGKILL at once (a throwaway cluster's data)."""
        for node in self.layout.nodes:
            pid = self.pid(node)
            if pid is not None:
                os.killpg(pid, signal.SIGCONT)
                os.killpg(pid, signal.SIGTERM if graceful else signal.SIGKILL)
        deadline = time.monotonic() + (STOP_TIMEOUT_SECONDS if graceful else 0)
        for node in self.layout.nodes:
            self._gone(node, within=max(0.0, deadline - time.monotonic()))
            self.stop(node, within=0)

    async def brokers(self, *, via: Node | None = None) -> set[int]:
        """The broker ids the cluster's metadata lists (asked of `via`, else of any node); empty if none
        answers."""
        try:
            replication = await read_replication(via.address if via else self.layout.bootstrap, topics=())
        except Exception:
            return set()
        return set(replication.brokers)

    async def in_sync(self, topics: Sequence[str] | None = None, *, via: Node | None = None) -> bool:
        """Whether every node is a broker of the cluster again and every partition of `topics` (default:
        every topic) has all its replicas in sync, asked of `via` (else any node); False while no node
        answers (a restarted node is listed before it answers)."""
        try:
            replication = await read_replication(via.address if via else self.layout.bootstrap, topics)
        except Exception:
            return False
        return (
            len(replication.brokers) == len(self.layout.nodes)
            and (topics is None or {p.topic for p in replication.partitions} == set(topics))
            and not replication.under_replicated()
        )

    async def wait_ready(self, *, within: float = START_TIMEOUT_SECONDS) -> None:
        """Until every node runs and answers with the whole cluster's metadata; raises on a node that exits
        or after `within` seconds."""
        wanted = {node.node_id for node in self.layout.nodes}
        deadline = time.monotonic() + within
        while True:
            dead = [n.node_id for n in self.layout.nodes if self.pid(n) is None]
            if dead:
                raise RuntimeError(f"Kafka node(s) {dead} exited (see {self.layout.directory}/node-*/logs)")
            answers = [await self.brokers(via=node) for node in self.layout.nodes]
            if all(seen == wanted for seen in answers):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the Kafka cluster did not form in {within:.0f} s (brokers seen: {answers})"
                )
            await asyncio.sleep(0.5)


def _status(cluster: KafkaCluster) -> int:
    """One line per node, then one per under-replicated partition; 1 when anything is down or lagging."""
    try:
        replication = asyncio.run(read_replication(cluster.layout.bootstrap))
    except Exception:
        replication = Replication(frozenset(), ())
    failed = False
    for node in cluster.layout.nodes:
        running = cluster.pid(node) is not None
        state = (
            "healthy"
            if running and node.node_id in replication.brokers
            else ("running" if running else "down")
        )
        failed |= state != "healthy"
        print(f"kafka-{node.node_id}   {state:8} {node.address}")
    for p in replication.under_replicated():
        print(f"kafka     UNDER-REPLICATED {p.topic}[{p.partition}]: {p.in_sync} of {p.replicas} in sync")
        failed = True
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--base-port", type=int, default=19092)
    parser.add_argument("--kafka-home", type=Path, default=Path(".local/kafka"))
    parser.add_argument("--config", type=Path, default=Path("infra/kafka/server.properties"))
    args = parser.parse_args(argv)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # "Unable connect" while nodes are starting
    if not 1 <= args.nodes <= 9:
        parser.error("--nodes must be 1..9")
    layout = ClusterLayout.from_base_port(args.dir.resolve(), args.nodes, args.base_port)
    cluster = KafkaCluster(layout, kafka_home=args.kafka_home.resolve(), template=args.config.resolve())
    if args.action == "up":
        cluster.up()
        asyncio.run(cluster.wait_ready())
        print(layout.bootstrap)
        return 0
    if args.action == "down":
        cluster.down()
        return 0
    return _status(cluster)


if __name__ == "__main__":
    sys.exit(main())
