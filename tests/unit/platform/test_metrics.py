from __future__ import annotations

import enum

import pytest
from prometheus_client import CollectorRegistry

from yovision_platform.observability import (
    INSTANCE_ID,
    build_info,
    create_registry,
    labeled_counter,
    labeled_gauge,
    labeled_histogram,
    render_latest,
    validate_instance_id,
)


class Outcome(enum.StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"


class Other(enum.StrEnum):
    ACCEPTED = "accepted"


def series_count(registry: CollectorRegistry, metric_name: str) -> int:
    return sum(
        1
        for family in registry.collect()
        for sample in family.samples
        if sample.name == metric_name and sample.labels
    )


def test_enum_member_and_its_string_value_record_the_same_series() -> None:
    registry = create_registry(include_process_metrics=False)
    items = labeled_counter(registry, "bell_items_total", "Items.", {"outcome": Outcome})
    items.labels(outcome=Outcome.ACCEPTED).inc()
    items.labels(outcome="accepted").inc()
    assert registry.get_sample_value("bell_items_total", {"outcome": "accepted"}) == 2.0


@pytest.mark.parametrize("value", ["tenant-42", "/internal/v1/audit-events:batch", "Accepted", "", 3])
def test_a_label_value_outside_the_enum_is_refused_and_creates_no_series(value: object) -> None:
    registry = create_registry(include_process_metrics=False)
    items = labeled_counter(registry, "bell_items_total", "Items.", {"outcome": Outcome})
    with pytest.raises(ValueError, match="outcome") as caught:
        items.labels(outcome=value)  # type: ignore[arg-type]
    if isinstance(value, str) and value:
        assert value not in str(caught.value)
    assert series_count(registry, "bell_items_total") == 0
    assert b"bell_items_total{" not in render_latest(registry)[0]


def test_a_member_of_another_enum_is_refused_even_with_an_equal_value() -> None:
    registry = create_registry(include_process_metrics=False)
    items = labeled_counter(registry, "bell_items_total", "Items.", {"outcome": Outcome})
    with pytest.raises(ValueError, match="wrong type"):
        items.labels(outcome=Other.ACCEPTED)
    assert series_count(registry, "bell_items_total") == 0


def test_missing_or_extra_label_names_are_refused() -> None:
    registry = create_registry(include_process_metrics=False)
    items = labeled_counter(registry, "bell_items_total", "Items.", {"outcome": Outcome})
    with pytest.raises(ValueError, match="exactly"):
        items.labels()
    with pytest.raises(ValueError, match="exactly"):
        items.labels(outcome=Outcome.ACCEPTED, device="d-1")
    assert series_count(registry, "bell_items_total") == 0


def test_frozenset_labels_accept_only_their_members() -> None:
    registry = create_registry(include_process_metrics=False)
    lag = labeled_gauge(registry, "relay_lag_rows", "Lag.", {"topic_kind": frozenset({"device", "audit"})})
    lag.labels(topic_kind="audit").set(5)
    with pytest.raises(ValueError, match="topic_kind"):
        lag.labels(topic_kind="sense.device.v1")
    assert registry.get_sample_value("relay_lag_rows", {"topic_kind": "audit"}) == 5.0
    assert series_count(registry, "relay_lag_rows") == 1


def test_instance_id_labels_accept_only_valid_instance_ids() -> None:
    registry = create_registry(include_process_metrics=False)
    owned = labeled_gauge(registry, "owned_partitions", "Owned.", {"instance_id": INSTANCE_ID})
    owned.labels(instance_id="reconciler-0-a1b2c3").set(3)
    for bad in ("Upper", "-leading", "x" * 64, "has space", "a_b"):
        with pytest.raises(ValueError, match="instance id"):
            owned.labels(instance_id=bad)
    assert series_count(registry, "owned_partitions") == 1


def test_histograms_validate_labels_and_observe() -> None:
    registry = create_registry(include_process_metrics=False)
    latency = labeled_histogram(registry, "push_seconds", "Push latency.", {"outcome": Outcome})
    latency.labels(outcome=Outcome.DUPLICATE).observe(0.2)
    assert registry.get_sample_value("push_seconds_count", {"outcome": "duplicate"}) == 1.0
    with pytest.raises(ValueError, match="outcome"):
        latency.labels(outcome="timeout")


def test_initialize_all_creates_every_enum_combination_at_zero() -> None:
    registry = create_registry(include_process_metrics=False)
    items = labeled_counter(
        registry, "bell_items_total", "Items.", {"outcome": Outcome, "source": frozenset({"http", "kafka"})}
    )
    items.initialize_all()
    assert series_count(registry, "bell_items_total") == 6
    assert registry.get_sample_value("bell_items_total", {"outcome": "rejected", "source": "kafka"}) == 0.0


def test_initialize_all_needs_instance_id_labels_fixed() -> None:
    registry = create_registry(include_process_metrics=False)
    items = labeled_counter(registry, "x_total", "X.", {"outcome": Outcome, "instance_id": INSTANCE_ID})
    with pytest.raises(ValueError, match="instance_id"):
        items.initialize_all()
    items.initialize_all(instance_id="host-1")
    assert series_count(registry, "x_total") == 3


def test_unlabelled_metrics_return_themselves() -> None:
    registry = create_registry(include_process_metrics=False)
    up = labeled_gauge(registry, "relay_running", "Running.", {})
    up.labels().set(1)
    assert registry.get_sample_value("relay_running") == 1.0


def test_label_declarations_must_be_fixed_non_empty_string_sets() -> None:
    registry = create_registry(include_process_metrics=False)

    class Numbers(enum.Enum):
        ONE = 1

    with pytest.raises(ValueError, match="str"):
        labeled_counter(registry, "a_total", "A.", {"n": Numbers})
    with pytest.raises(ValueError, match="empty"):
        labeled_counter(registry, "b_total", "B.", {"n": frozenset()})
    with pytest.raises(TypeError):
        labeled_counter(registry, "c_total", "C.", {"n": ["a", "b"]})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="metric name"):
        labeled_counter(registry, "Bad-Name", "D.", {})


def test_registries_are_independent_so_tests_can_build_many() -> None:
    for _ in range(3):
        registry = create_registry()
        labeled_counter(registry, "bell_items_total", "Items.", {"outcome": Outcome})
        build_info(registry, service="bell-receiver", version="0.1.0", instance_id="host-1")


def test_build_info_and_rendering() -> None:
    registry = create_registry(include_process_metrics=False)
    build_info(registry, service="bell-receiver", version="0.1.0+abc", instance_id="host-1")
    body, content_type = render_latest(registry)
    assert (
        b'yovision_build_info{instance_id="host-1",service="bell-receiver",version="0.1.0+abc"} 1.0' in body
    )
    assert content_type.startswith("text/plain")


@pytest.mark.parametrize(
    ("service", "version", "instance_id"),
    [("Bell", "0.1", "host-1"), ("bell", "0 1", "host-1"), ("bell", "0.1", "HOST")],
)
def test_build_info_refuses_invalid_values(service: str, version: str, instance_id: str) -> None:
    with pytest.raises(ValueError, match="must match"):
        build_info(
            create_registry(include_process_metrics=False),
            service=service,
            version=version,
            instance_id=instance_id,
        )


def test_instance_id_validation_boundaries() -> None:
    assert validate_instance_id("a") == "a"
    assert validate_instance_id("0" + "a" * 62) == "0" + "a" * 62
    with pytest.raises(ValueError, match="instance id"):
        validate_instance_id("0" + "a" * 63)


def test_a_renamed_metric_is_exported_under_its_former_name_too() -> None:
    registry = create_registry(include_process_metrics=False)
    counter = labeled_counter(
        registry,
        "new_things_total",
        "Things.",
        {"outcome": frozenset({"ok", "bad"})},
        former_name="old_things",
    )
    gauge = labeled_gauge(registry, "new_level", "Level.", {}, former_name="old_level")
    histogram = labeled_histogram(
        registry, "new_seconds", "Time.", {}, buckets=(1.0,), former_name="old_seconds"
    )
    counter.labels(outcome="ok").inc(3)
    gauge.labels().set(7)
    histogram.labels().observe(0.5)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("new_things_total", outcome="ok") == value("old_things_total", outcome="ok") == 3
    assert value("new_level") == value("old_level") == 7
    assert value("new_seconds_count") == value("old_seconds_count") == 1
    assert value("old_seconds_bucket", le="1.0") == 1
    text = render_latest(registry)[0].decode()
    assert "# HELP old_things_total Former name of new_things, exported until the next release." in text
    assert "# TYPE old_level gauge" in text


def test_a_metric_without_a_former_name_is_exported_once() -> None:
    registry = create_registry(include_process_metrics=False)
    labeled_gauge(registry, "only_level", "Level.", {}).labels().set(1)
    assert render_latest(registry)[0].decode().count("# TYPE ") == 1
