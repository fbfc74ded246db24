"""Composition root of signal-watcher's use cases: `bootstrap` takes the dependencies (units of work, the
probe, the Avro serde, the metrics, what wakes the scheduler) and returns the use cases. Production
(`entrypoints/main.py`) passes the real adapters, tests and the bench the fakes of `adapters/memory.py`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from signal_watcher.service_layer.checks import CheckRunner
from signal_watcher.service_layer.metrics import SignalMetrics
from signal_watcher.service_layer.ports import Probe, UnitOfWorkFactory
from signal_watcher.service_layer.retention import RetentionCleaner
from signal_watcher.service_layer.watchers import Watchers
from signal_watcher.settings import (
    DEFAULT_CHECK_RETENTION_DAYS,
    DEFAULT_MAX_WATCHERS_PER_USER,
    effective_retention_days,
)
from yovision_platform.messaging import AvroSerde

__all__ = ["SignalUseCaseSettings", "SignalUseCases", "UseCaseLimits", "bootstrap"]


class SignalUseCaseSettings(Protocol):
    """What the use cases read of the settings (`SignalWatcherSettings` has it)."""

    @property
    def max_watchers_per_user(self) -> int: ...

    @property
    def check_retention_days(self) -> int: ...


@dataclass(frozen=True)
class UseCaseLimits:
    """`SignalUseCaseSettings` without the environment (tests, the bench)."""

    max_watchers_per_user: int = DEFAULT_MAX_WATCHERS_PER_USER
    check_retention_days: int = DEFAULT_CHECK_RETENTION_DAYS


@dataclass(frozen=True)
class SignalUseCases:
    watchers: Watchers  # the API's
    check_runner: CheckRunner  # the scheduler worker's
    retention: RetentionCleaner  # the check-retention worker's


def bootstrap(
    settings: SignalUseCaseSettings,
    *,
    units_of_work: UnitOfWorkFactory,
    probe: Probe,
    serde: AvroSerde,
    metrics: SignalMetrics | None = None,
    check_requested: Callable[[], None] = lambda: None,
    topic_overrides: Mapping[str, str] | None = None,
) -> SignalUseCases:
    """`check_requested`: wakes this instance's scheduler worker (a user asked for a check now)."""
    return SignalUseCases(
        watchers=Watchers(
            units_of_work,
            probe,
            max_watchers_per_user=settings.max_watchers_per_user,
            check_requested=check_requested,
        ),
        check_runner=CheckRunner(
            units_of_work, probe, serde, topic_overrides=topic_overrides, metrics=metrics
        ),
        retention=RetentionCleaner(units_of_work, effective_retention_days(settings.check_retention_days)),
    )
