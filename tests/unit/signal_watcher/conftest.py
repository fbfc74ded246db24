"""Use cases of signal-watcher on the in-memory fakes (`signal_watcher.adapters.memory`), which the contract
suites in tests/ports/signal_watcher/ prove equal to the PostgreSQL and HTTP adapters."""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from signal_watcher.adapters.memory import MemoryProbe, MemorySignalDatabase
from signal_watcher.domain.checking import CheckDecision
from signal_watcher.service_layer.checks import CheckRunner
from signal_watcher.service_layer.metrics import SignalMetrics
from tests.support.signal_watcher_fixtures import (
    Wakes,
    checks_of,
    cipher_for,
    claim_and_run,
    insert,
    make_spec,
    stored,
    use_cases_on,
    wakes,
)
from yovision_platform.messaging import AvroSerde, SchemaRegistry

__all__ = ["Wakes", "checks_of", "cipher_for", "insert", "make_spec", "stored", "wakes"]

SITE = "site.example.com"  # a public name of the fake probe's DNS
NAMES = {SITE: ["93.184.216.34"], "private.example.com": ["10.1.2.3"]}


def url(path: str) -> str:
    return f"https://{SITE}{path}"


@pytest.fixture
def database() -> MemorySignalDatabase:
    return MemorySignalDatabase(cipher_for(os.urandom(32)))


@pytest.fixture
def probe() -> MemoryProbe:
    return MemoryProbe(names=NAMES)


@pytest.fixture(scope="session")
def serde() -> AvroSerde:
    return AvroSerde(SchemaRegistry.load())


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def runner(
    database: MemorySignalDatabase, probe: MemoryProbe, serde: AvroSerde, registry: CollectorRegistry
) -> CheckRunner:
    return use_cases_on(database, probe, metrics=SignalMetrics.create(registry)).check_runner


def make_due(database: MemorySignalDatabase, watcher_id: uuid.UUID, *, days_ago: int = 0) -> None:
    """As `UPDATE watchers SET next_check_at = now() - make_interval(days => days_ago)` would."""
    row = database.tables.watchers[watcher_id]
    due = database.clock.now() - timedelta(days=days_ago)
    database.tables.watchers[watcher_id] = replace(row, record=replace(row.record, next_check_at=due))


async def check_now(
    database: MemorySignalDatabase, runner: CheckRunner, watcher_id: uuid.UUID
) -> CheckDecision | None:
    """Make the watcher the earliest due one and run one check of it."""
    make_due(database, watcher_id, days_ago=1)
    return await claim_and_run(database, runner, watcher_id)


def decoded(database: MemorySignalDatabase, serde: AvroSerde) -> list[tuple[str, str, dict[str, Any]]]:
    """(topic, event_type, decoded record) of every committed outbox message, oldest first."""
    return [(m.topic, m.event_type, dict(serde.decode(m.value).record)) for m in database.committed]
