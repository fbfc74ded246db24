"""Creates the Kafka topics listed in infra/topics.toml that do not exist yet.

Existing topics are never deleted or altered; one whose partition count differs from the list is reported.
On a cluster of three or more brokers topics get replication factor 3 and `min.insync.replicas=2`; one
existing with fewer replicas is reported (`make doctor` reports it too).
With `--prefix P` every topic is created as `P<name>` (an environment sharing the cluster, see
`<P>_KAFKA_PREFIX` in docs/architecture.md).
Usage: .venv/bin/python infra/scripts/create_topics.py [--bootstrap HOST:PORT] [--topics-file PATH]
       [--prefix P]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from yovision_platform.messaging import KAFKA_PREFIX_PATTERN
from yovision_platform.tools import resolve_bootstrap

DEFAULT_TOPICS_FILE = Path(__file__).resolve().parents[1] / "topics.toml"
CLUSTER_REPLICATION_FACTOR = 3
ADMIN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    cleanup_policy: str
    retention_ms: int | None

    def configs(self, replication_factor: int = 1) -> dict[str, str]:
        configs = {"cleanup.policy": self.cleanup_policy}
        if self.retention_ms is not None:
            configs["retention.ms"] = str(self.retention_ms)
        if replication_factor > 1:
            configs["min.insync.replicas"] = str(replication_factor - 1)
        return configs


def load_topic_specs(path: Path, prefix: str = "") -> list[TopicSpec]:
    with path.open("rb") as f:
        entries = tomllib.load(f)["topic"]
    return [
        TopicSpec(
            name=prefix + e["name"],
            partitions=int(e["partitions"]),
            cleanup_policy=e["cleanup_policy"],
            retention_ms=int(e["retention_ms"]) if "retention_ms" in e else None,
        )
        for e in entries
    ]


async def layouts(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, tuple[int, int]]:
    """(partitions, fewest replicas of a partition) per topic."""
    if not names:
        return {}
    described = await admin.describe_topics(names)
    return {
        t["topic"]: (len(t["partitions"]), min((len(p["replicas"]) for p in t["partitions"]), default=0))
        for t in described
    }


def replication_factor(brokers: int) -> int:
    return CLUSTER_REPLICATION_FACTOR if brokers >= CLUSTER_REPLICATION_FACTOR else 1


async def ensure_topics(bootstrap: str, specs: list[TopicSpec]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
    await admin.start()
    try:
        rf = replication_factor(len((await admin.describe_cluster())["brokers"]))
        existing = set(await admin.list_topics())
        missing = [s for s in specs if s.name not in existing]
        present = [s for s in specs if s.name in existing]
        for spec in missing:
            configs = spec.configs(rf)
            try:
                await admin.create_topics([NewTopic(spec.name, spec.partitions, rf, topic_configs=configs)])
                print(f"created  {spec.name} (partitions={spec.partitions}, replication={rf}, {configs})")
            except TopicAlreadyExistsError:
                present.append(spec)
        found = await layouts(admin, [s.name for s in present])
        for spec in present:
            partitions, replicas = found.get(spec.name, (0, 0))
            if partitions != spec.partitions:
                wanted = spec.partitions
                print(
                    f"MISMATCH {spec.name}: {partitions} partitions, topics.toml says {wanted} (left as is)"
                )
            elif replicas < rf:
                print(f"MISMATCH {spec.name}: replication {replicas}, the cluster wants {rf} (left as is)")
            else:
                print(f"exists   {spec.name} (partitions={partitions}, replication={replicas})")
    finally:
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default=None, help="default: the local stack's (.local/stack.env)")
    parser.add_argument("--topics-file", type=Path, default=DEFAULT_TOPICS_FILE)
    parser.add_argument("--prefix", default="", help="put this in front of every topic name")
    args = parser.parse_args()
    if KAFKA_PREFIX_PATTERN.fullmatch(args.prefix) is None:
        sys.exit("create_topics: --prefix must be empty or match ^[a-z0-9][a-z0-9._-]{0,62}$")
    specs = load_topic_specs(args.topics_file, args.prefix)
    bootstrap = resolve_bootstrap(args.bootstrap)
    try:
        asyncio.run(asyncio.wait_for(ensure_topics(bootstrap, specs), ADMIN_TIMEOUT_S * 2))
    except Exception as exc:  # one clear line instead of a traceback
        sys.exit(f"create_topics: failed against {bootstrap}: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
