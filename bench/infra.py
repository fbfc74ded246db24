"""The real local stack for benchmarks: start it, and create (then drop) a unique schema and topic.

Each run isolates itself by name, never by new servers: schema ``bench_<hex>`` with its owner and runtime
roles (migrated exactly as a service schema is), and topic ``bench.<hex>.v1``. Both are dropped on exit,
also when the run fails or is interrupted.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from yovision_platform.localstack import LocalStack, runtime_dsn
from yovision_platform.messaging import CLUSTER_REPLICATION_FACTOR
from yovision_platform.storage import Identifier, SchemaPlan, create_pool, drop, migrate

__all__ = [
    "BENCH_TOPIC_PARTITIONS",
    "REPO_ROOT",
    "BenchSchema",
    "BenchTopics",
    "Stack",
    "bench_schema",
    "bench_topics",
    "create_stack_topics",
    "ensure_stack",
    "replicated_topic",
    "stack_replicas",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
STACK_SCRIPT = REPO_ROOT / "infra" / "scripts" / "stack.sh"
STACK_ENV_FILE = REPO_ROOT / ".local" / "stack.env"
# Set to 1 when the caller already started the stack (as tests/conftest.py honours it).
STACK_STARTED_ENV = "YOVISION_STACK_STARTED"
BENCH_TOPIC_PARTITIONS = 6
BENCH_POOL_MAX_SIZE = 6


@dataclass(frozen=True)
class Stack:
    admin_dsn: str
    kafka_bootstrap: str


def ensure_stack(components: Sequence[str] = ("pg", "kafka")) -> Stack:
    """Start (or reuse) PostgreSQL and Kafka (or only `components`) through the same script `make up` uses."""
    if os.environ.get(STACK_STARTED_ENV) != "1":
        subprocess.run(
            ["bash", str(STACK_SCRIPT), "up", *components], check=True, cwd=REPO_ROOT, stdout=sys.stderr
        )
    local = LocalStack.load(STACK_ENV_FILE.parent)
    return Stack(admin_dsn=local.admin_dsn, kafka_bootstrap=local.kafka_bootstrap)


@dataclass(frozen=True)
class BenchSchema:
    """A migrated schema (platform track + bench/migrations), a pool of its runtime role and its DSN (for
    relay processes)."""

    name: Identifier
    pool: asyncpg.Pool
    dsn: str


@contextlib.asynccontextmanager
async def bench_schema(stack: Stack, *, purpose: str) -> AsyncIterator[BenchSchema]:
    """A fresh `bench_<hex>` schema, its roles and a runtime pool; all dropped on exit."""
    plan = SchemaPlan.for_service(f"bench_{uuid.uuid4().hex[:12]}", BENCH_MIGRATIONS_DIR)
    password = secrets.token_urlsafe(24)
    admin = await asyncpg.connect(stack.admin_dsn)
    try:
        await migrate(admin, plan, runtime_password=password)
        dsn = runtime_dsn(stack.admin_dsn, plan.runtime_role, password)
        pool = await create_pool(dsn, application_name=f"bench-{purpose}", max_size=BENCH_POOL_MAX_SIZE)
        try:
            yield BenchSchema(plan.schema, pool, dsn)
        finally:
            await pool.close()
    finally:
        try:
            await drop(admin, plan)
        finally:
            await admin.close()


class BenchTopics:
    """Creates `bench.<hex>...` topics with BENCH_TOPIC_PARTITIONS partitions; deletes them all on exit.
    Each run gets its own topic, so counting a topic's records checks that run's delivery."""

    def __init__(self, admin: AIOKafkaAdminClient, base: str, *, replicas: int = 1) -> None:
        self._admin = admin
        self.base = base
        self.created: list[str] = []
        self._replicas = replicas  # the stack's: 3 on a cluster of three (acks=all waits for 2 of them)

    async def create(self, name: str) -> str:
        await self._admin.create_topics([replicated_topic(name, BENCH_TOPIC_PARTITIONS, self._replicas)])
        self.created.append(name)
        return name

    async def for_run(self, run: str) -> str:
        """The topic a relay run publishes to with topic prefix `run.` (the relay adds the prefix)."""
        return await self.create(f"{run}.{self.base}")


@contextlib.asynccontextmanager
async def bench_topics(stack: Stack) -> AsyncIterator[BenchTopics]:
    admin = AIOKafkaAdminClient(bootstrap_servers=stack.kafka_bootstrap, client_id="bench-admin")
    await admin.start()
    topics = BenchTopics(admin, f"bench.{uuid.uuid4().hex[:12]}.v1", replicas=await stack_replicas(admin))
    try:
        yield topics
    finally:
        try:
            if topics.created:
                await admin.delete_topics(topics.created)
        finally:
            await admin.close()


async def stack_replicas(admin: AIOKafkaAdminClient) -> int:
    """The replication factor the stack gives its topics (as infra/scripts/create_topics.py): 3 on a cluster
    of at least three brokers, else 1."""
    brokers = len((await admin.describe_cluster())["brokers"])
    return CLUSTER_REPLICATION_FACTOR if brokers >= CLUSTER_REPLICATION_FACTOR else 1


def replicated_topic(name: str, partitions: int, replicas: int) -> NewTopic:
    """A topic of `replicas` replicas and, when replicated, min.insync.replicas one less (acks=all then
    waits for 2 of 3 and survives one broker down)."""
    configs = {"min.insync.replicas": str(replicas - 1)} if replicas > 1 else {}
    return NewTopic(name, partitions, replicas, topic_configs=configs)


async def create_stack_topics(admin: AIOKafkaAdminClient, partitions: Mapping[str, int]) -> None:
    """Create every topic (name -> partition count) with the stack's replication: the benchmarks' topics on
    a cluster are replicated as the services' are."""
    replicas = await stack_replicas(admin)
    await admin.create_topics([replicated_topic(name, count, replicas) for name, count in partitions.items()])


async def stack_topics(bootstrap: str, partitions: Mapping[str, int], *, create: bool) -> None:
    """Create (`create_stack_topics`) or delete the topics (name -> partition count) of a benchmark, through
    an admin client of its own."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        if create:
            await create_stack_topics(admin, partitions)
        else:
            await admin.delete_topics(list(partitions))
    finally:
        await admin.close()
