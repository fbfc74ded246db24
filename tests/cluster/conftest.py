"""A private three-node KRaft cluster (yovision_platform.tools.kafka_cluster) per module, on free loopback
ports beside the session's single broker, with the stack's PostgreSQL for the outboxes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.postgres import TEST_SERVICE_MIGRATIONS, migrated_schema_fixture, runtime_pool_fixture
from tests.support.stack import REPO_ROOT, free_port

# fixtures migrated, runtime_pool: tests/cluster/conftest.py makes its own
from yovision_platform.tools.kafka_cluster import ClusterLayout, KafkaCluster

NODES = 3

# the platform tests' service schema, for the outboxes
migrated = migrated_schema_fixture(TEST_SERVICE_MIGRATIONS, name="migrated")
runtime_pool = runtime_pool_fixture("migrated", name="runtime_pool", max_size=6)


@pytest.fixture(scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[KafkaCluster]:
    directory: Path = tmp_path_factory.mktemp("kafka-cluster")
    layout = ClusterLayout.on_ports(directory, [(free_port(), free_port()) for _ in range(NODES)])
    started = KafkaCluster(
        layout,
        kafka_home=REPO_ROOT / ".local" / "kafka",
        template=REPO_ROOT / "infra" / "kafka" / "server.properties",
        quick_start=True,
    )
    try:
        started.up()
        await started.wait_ready()
        yield started
    finally:
        started.down(graceful=False)
