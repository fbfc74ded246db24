"""Creates the Kafka topics listed in infra/topics.toml that do not exist yet.

Existing topics are never deleted or altered; one whose partition count differs from the list is reported.
With `--prefix P` every topic is created as `P<name>` (an environment sharing the cluster, see
`<P>_KAFKA_PREFIX` in docs/architecture.md).
Usage: .venv/bin/python infra/scripts/create_topics.py [--bootstrap HOST:PORT] [--topics-file PATH]
       [--prefix P]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from yovision_platform.naming import KAFKA_PREFIX_PATTERN

DEFAULT_TOPICS_FILE = Path(__file__).resolve().parents[1] / "topics.toml"
DEFAULT_BOOTSTRAP = os.environ.get("YOVISION_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
REPLICATION_FACTOR = 1
ADMIN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    cleanup_policy: str
    retention_ms: int | None

    def configs(self) -> dict[str, str]:
        configs = {"cleanup.policy": self.cleanup_policy}
        if self.retention_ms is not None:
            configs["retention.ms"] = str(self.retention_ms)
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


async def partition_counts(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, int]:
    if not names:
        return {}
    described = await admin.describe_topics(names)
    return {t["topic"]: len(t["partitions"]) for t in described}


async def ensure_topics(bootstrap: str, specs: list[TopicSpec]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [s for s in specs if s.name not in existing]
        present = [s for s in specs if s.name in existing]
        for spec in missing:
            new_topic = NewTopic(spec.name, spec.partitions, REPLICATION_FACTOR, topic_configs=spec.configs())
            try:
                await admin.create_topics([new_topic])
                print(f"created  {spec.name} (partitions={spec.partitions}, {spec.configs()})")
            except TopicAlreadyExistsError:
                present.append(spec)
        counts = await partition_counts(admin, [s.name for s in present])
        for spec in present:
            actual = counts.get(spec.name)
            if actual == spec.partitions:
                print(f"exists   {spec.name} (partitions={actual})")
            else:
                wanted = spec.partitions
                print(f"MISMATCH {spec.name}: {actual} partitions, topics.toml says {wanted} (left as is)")
    finally:
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP)
    parser.add_argument("--topics-file", type=Path, default=DEFAULT_TOPICS_FILE)
    parser.add_argument("--prefix", default="", help="put this in front of every topic name")
    args = parser.parse_args()
    if KAFKA_PREFIX_PATTERN.fullmatch(args.prefix) is None:
        sys.exit("create_topics: --prefix must be empty or match ^[a-z0-9][a-z0-9._-]{0,62}$")
    specs = load_topic_specs(args.topics_file, args.prefix)
    try:
        asyncio.run(asyncio.wait_for(ensure_topics(args.bootstrap, specs), ADMIN_TIMEOUT_S * 2))
    except Exception as exc:  # one clear line instead of a traceback
        sys.exit(f"create_topics: failed against {args.bootstrap}: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
