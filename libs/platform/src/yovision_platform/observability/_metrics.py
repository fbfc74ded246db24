"""Prometheus helpers whose labels can only take values from fixed sets.

SPEC: labels come only from fixed enums and a validated instance id, never tenant, site, device, path,
URI, user or error text. So every labelled metric is declared with, per label, the complete set of
allowed values (an ``enum.Enum`` with ``str`` values, or a ``frozenset[str]``), or :data:`INSTANCE_ID`.
Any other value raises ``ValueError`` *before* prometheus-client is asked for a child, so a bad value
never creates a series.

Metrics live in a per-service :class:`~prometheus_client.CollectorRegistry` from :func:`create_registry`,
never in the global default registry, so tests can build as many as they like.

Instance id format (:data:`INSTANCE_ID_PATTERN`): 1-63 characters, lowercase ASCII letters, digits and
``-``, starting with a letter or digit (a DNS label without the trailing-hyphen rule).
"""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = [
    "DEFAULT_LATENCY_BUCKETS_SECONDS",
    "INSTANCE_ID",
    "INSTANCE_ID_PATTERN",
    "LabelSpec",
    "LabeledMetric",
    "build_info",
    "create_registry",
    "labeled_counter",
    "labeled_gauge",
    "labeled_histogram",
    "render_latest",
    "validate_instance_id",
]

INSTANCE_ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
SERVICE_NAME_PATTERN = re.compile(r"[a-z][a-z0-9-]{0,62}")
VERSION_PATTERN = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}")
METRIC_NAME_PATTERN = re.compile(r"[a-z_][a-z0-9_]{0,199}")
MAX_LABEL_VALUE_CHARS = 64
DEFAULT_LATENCY_BUCKETS_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def validate_instance_id(value: object) -> str:
    """Return ``value`` if it is a valid instance id, else raise ``ValueError`` (value not echoed)."""
    if not isinstance(value, str) or INSTANCE_ID_PATTERN.fullmatch(value) is None:
        raise ValueError("instance id must match ^[a-z0-9][a-z0-9-]{0,62}$")
    return value


class _InstanceIdLabel:
    """Marker: this label takes a validated instance id rather than a value from a fixed set."""

    def __repr__(self) -> str:
        return "INSTANCE_ID"


INSTANCE_ID = _InstanceIdLabel()

LabelSpec = type[enum.Enum] | frozenset[str] | _InstanceIdLabel


@dataclass(frozen=True)
class _Label:
    name: str
    allowed: frozenset[str] | None  # None: instance id
    enum_type: type[enum.Enum] | None

    @classmethod
    def from_spec(cls, name: str, spec: LabelSpec) -> _Label:
        if isinstance(spec, _InstanceIdLabel):
            return cls(name, None, None)
        if isinstance(spec, frozenset):
            values = spec
            enum_type = None
        elif isinstance(spec, type) and issubclass(spec, enum.Enum):
            member_values = [member.value for member in spec]
            if not all(isinstance(value, str) for value in member_values):
                raise ValueError(f"label {name!r}: enum values must be str")
            values = frozenset(member_values)
            enum_type = spec
        else:
            raise TypeError(f"label {name!r}: spec must be an Enum type, a frozenset[str] or INSTANCE_ID")
        if not values:
            raise ValueError(f"label {name!r}: the set of allowed values is empty")
        for value in values:
            if not isinstance(value, str) or not 0 < len(value) <= MAX_LABEL_VALUE_CHARS:
                raise ValueError(f"label {name!r}: allowed values must be non-empty str of <= 64 chars")
        return cls(name, values, enum_type)

    def check(self, value: object) -> str:
        if self.allowed is None:
            return validate_instance_id(value)
        if isinstance(value, enum.Enum):
            if self.enum_type is None or not isinstance(value, self.enum_type):
                raise ValueError(f"label {self.name!r}: enum member of the wrong type")
            return str(value.value)
        if isinstance(value, str) and value in self.allowed:
            return value
        # Never echo the value: it may be exactly the kind of text labels must not hold.
        raise ValueError(f"label {self.name!r}: value not in the declared set")


M = TypeVar("M", bound=MetricWrapperBase)


class LabeledMetric(Generic[M]):
    """A prometheus-client metric whose label values are checked against fixed sets.

    ``labels(outcome=Outcome.ACCEPTED)`` returns the prometheus child (``.inc()``, ``.observe()``,
    ``.set()``); unlabelled metrics return themselves.
    """

    def __init__(self, metric: M, labels: Sequence[_Label]) -> None:
        self.metric = metric
        self._labels = tuple(labels)

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(label.name for label in self._labels)

    def labels(self, **values: enum.Enum | str) -> M:
        if set(values) != set(self.label_names):
            raise ValueError(f"labels must be exactly {sorted(self.label_names)}")
        if not self._labels:
            return self.metric
        checked = {label.name: label.check(values[label.name]) for label in self._labels}
        return self.metric.labels(**checked)

    def initialize_all(self, **fixed: enum.Enum | str) -> None:
        """Create every combination of the fixed-set labels at zero, so rates exist before the first
        event. Instance-id labels have no fixed set: pass their value in ``fixed``."""
        for combination in self._combinations(fixed):
            self.labels(**combination)

    def _combinations(self, fixed: Mapping[str, enum.Enum | str]) -> Iterator[dict[str, enum.Enum | str]]:
        names = [label.name for label in self._labels if label.name not in fixed]
        pools: list[list[str]] = []
        for label in self._labels:
            if label.name in fixed:
                continue
            if label.allowed is None:
                raise ValueError(f"label {label.name!r} has no fixed set: pass it in fixed")
            pools.append(sorted(label.allowed))
        for values in itertools.product(*pools):
            yield {**fixed, **dict(zip(names, values, strict=True))}


class _FormerName(Collector):
    """A renamed metric's samples under its former name too, until the next release (docs/migrating.md):
    dashboards and alerts move to the new name at their own pace."""

    def __init__(self, metric: MetricWrapperBase, name: str, former_name: str) -> None:
        if METRIC_NAME_PATTERN.fullmatch(former_name) is None:
            raise ValueError(f"metric name {former_name!r} must match {METRIC_NAME_PATTERN.pattern}")
        self._metric = metric
        # A counter's family drops `_total` (its samples carry it again): rename the stem.
        self._stem = name.removesuffix("_total")
        self._former_stem = former_name.removesuffix("_total")

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        for family in self._metric.collect():
            former = Metric(
                self._former_stem + family.name.removeprefix(self._stem),
                f"Former name of {self._stem}, exported until the next release. {family.documentation}",
                family.type,
            )
            former.samples = [
                sample._replace(name=self._former_stem + sample.name.removeprefix(self._stem))
                for sample in family.samples
            ]
            yield former


def _former_name(
    registry: CollectorRegistry, metric: MetricWrapperBase, name: str, former: str | None
) -> None:
    if former is not None:
        registry.register(_FormerName(metric, name, former))


def _declare(name: str, labels: Mapping[str, LabelSpec]) -> list[_Label]:
    if METRIC_NAME_PATTERN.fullmatch(name) is None:
        raise ValueError(f"metric name {name!r} must match {METRIC_NAME_PATTERN.pattern}")
    return [_Label.from_spec(label_name, spec) for label_name, spec in labels.items()]


def labeled_counter(
    registry: CollectorRegistry,
    name: str,
    documentation: str,
    labels: Mapping[str, LabelSpec],
    *,
    former_name: str | None = None,
) -> LabeledMetric[Counter]:
    declared = _declare(name, labels)
    metric = Counter(name, documentation, [label.name for label in declared], registry=registry)
    _former_name(registry, metric, name, former_name)
    return LabeledMetric(metric, declared)


def labeled_gauge(
    registry: CollectorRegistry,
    name: str,
    documentation: str,
    labels: Mapping[str, LabelSpec],
    *,
    former_name: str | None = None,
) -> LabeledMetric[Gauge]:
    declared = _declare(name, labels)
    metric = Gauge(name, documentation, [label.name for label in declared], registry=registry)
    _former_name(registry, metric, name, former_name)
    return LabeledMetric(metric, declared)


def labeled_histogram(
    registry: CollectorRegistry,
    name: str,
    documentation: str,
    labels: Mapping[str, LabelSpec],
    buckets: Sequence[float] = DEFAULT_LATENCY_BUCKETS_SECONDS,
    *,
    former_name: str | None = None,
) -> LabeledMetric[Histogram]:
    declared = _declare(name, labels)
    metric = Histogram(
        name, documentation, [label.name for label in declared], registry=registry, buckets=buckets
    )
    _former_name(registry, metric, name, former_name)
    return LabeledMetric(metric, declared)


def create_registry(*, include_process_metrics: bool = True) -> CollectorRegistry:
    """A fresh registry for one service (optionally with process_* and python_info metrics)."""
    registry = CollectorRegistry()
    if include_process_metrics:
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
    return registry


def build_info(registry: CollectorRegistry, *, service: str, version: str, instance_id: str) -> Gauge:
    """Register ``yovision_build_info{service,version,instance_id} 1``."""
    if SERVICE_NAME_PATTERN.fullmatch(service) is None:
        raise ValueError(f"service name must match {SERVICE_NAME_PATTERN.pattern}")
    if VERSION_PATTERN.fullmatch(version) is None:
        raise ValueError(f"version must match {VERSION_PATTERN.pattern}")
    validate_instance_id(instance_id)
    gauge = Gauge(
        "yovision_build_info",
        "Build and instance of this process (value is always 1).",
        ["service", "version", "instance_id"],
        registry=registry,
    )
    gauge.labels(service=service, version=version, instance_id=instance_id).set(1)
    return gauge


def render_latest(registry: CollectorRegistry) -> tuple[bytes, str]:
    """The registry in Prometheus text exposition format, and its Content-Type."""
    return generate_latest(registry), CONTENT_TYPE_LATEST
