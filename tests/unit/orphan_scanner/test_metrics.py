"""orphan-scanner metrics: enum-only labels, last-scan gauges, apply totals from the database."""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry

from orphan_scanner.service_layer.metrics import ObservedClass, OrphanMetrics, ScanResult, ScanTrigger
from yovision_platform.observability import create_registry, render_latest

SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")
LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>[^"]*)"')

SERVERS = ("mtx-a", "mtx-b")
ALLOWED_LABEL_VALUES = {
    "trigger": {t.value for t in ScanTrigger},
    "result": {r.value for r in ScanResult},
    "class": {c.value for c in ObservedClass},
    "media_server": set(SERVERS),
}


def fresh() -> tuple[OrphanMetrics, CollectorRegistry]:
    registry = create_registry(include_process_metrics=False)
    return OrphanMetrics(registry, SERVERS), registry


def last_scan(found: dict[tuple[str, frozenset[tuple[str, str]]], float], cls: str, server: str) -> float:
    return value(found, "orphan_last_scan_paths", media_server=server, **{"class": cls})


def samples(registry: CollectorRegistry) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    body, content_type = render_latest(registry)
    assert content_type.startswith("text/plain")
    found: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match is not None, line
        labels = frozenset((m["key"], m["value"]) for m in LABEL.finditer(match["labels"] or ""))
        found[(match["name"], labels)] = float(match["value"])
    return found


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return found[(name, frozenset(labels.items()))]


def test_enum_values_are_the_stable_codes() -> None:
    assert [t.value for t in ScanTrigger] == ["periodic", "manual"]
    assert [r.value for r in ScanResult] == ["complete", "failed", "lease_lost"]
    assert [c.value for c in ObservedClass] == ["observed", "in_use", "owned_stale", "unowned"]


def test_every_series_exists_at_zero_with_enum_labels_only() -> None:
    _, registry = fresh()
    found = samples(registry)
    for trigger in ScanTrigger:
        for result in ScanResult:
            assert value(found, "orphan_scans_total", trigger=trigger.value, result=result.value) == 0
    for cls in ObservedClass:
        for server in SERVERS:
            assert last_scan(found, cls.value, server) == 0
    assert value(found, "orphan_scan_seconds_count") == 0
    assert value(found, "orphan_apply_blocked_total") == 0
    assert value(found, "orphan_paths_deleted_total") == 0
    assert value(found, "orphan_path_delete_failures_total") == 0
    for _name, labels in found:
        for key, label_value in labels:
            if key == "le":  # histogram bucket bounds are numbers
                assert label_value == "+Inf" or float(label_value) > 0
            else:
                assert label_value in ALLOWED_LABEL_VALUES[key], (key, label_value)


def test_last_scan_counts_are_set_per_class_and_server() -> None:
    metrics, registry = fresh()
    metrics.set_last_scan(
        {"mtx-a": {"observed": 100, "in_use": 85, "owned_stale": 10, "unowned": 5}, "mtx-b": {"observed": 1}}
    )
    found = samples(registry)
    assert last_scan(found, "observed", "mtx-a") == 100
    assert last_scan(found, "in_use", "mtx-a") == 85
    assert last_scan(found, "owned_stale", "mtx-a") == 10
    assert last_scan(found, "unowned", "mtx-a") == 5
    assert last_scan(found, "observed", "mtx-b") == 1


def test_missing_classes_read_zero_and_unknown_keys_or_servers_make_no_series() -> None:
    metrics, registry = fresh()
    metrics.set_last_scan({"mtx-a": {"observed": 7}, "mtx-b": {"observed": 2}})
    metrics.set_last_scan({"mtx-a": {"observed": 3, "tenant-a-site-1-cam": 1}, "http://10.0.0.9:9997": {}})
    found = samples(registry)
    assert last_scan(found, "observed", "mtx-a") == 3
    assert last_scan(found, "unowned", "mtx-a") == 0
    assert last_scan(found, "observed", "mtx-b") == 0  # not in the last report: zero
    body = render_latest(registry)[0].decode()
    assert "tenant-a-site-1-cam" not in body and "10.0.0.9" not in body


def test_apply_totals_are_exported_as_counters() -> None:
    metrics, registry = fresh()
    metrics.set_apply_totals({"blocked": 2, "deleted": 17, "failed": 3})
    found = samples(registry)
    assert value(found, "orphan_apply_blocked_total") == 2
    assert value(found, "orphan_paths_deleted_total") == 17
    assert value(found, "orphan_path_delete_failures_total") == 3
    metrics.set_apply_totals({"blocked": 3, "deleted": 20, "failed": 3})
    found = samples(registry)
    assert value(found, "orphan_apply_blocked_total") == 3
    assert value(found, "orphan_paths_deleted_total") == 20
    body = render_latest(registry)[0].decode()
    assert "# TYPE orphan_apply_blocked_total counter" in body


def test_scan_counter_refuses_values_outside_the_enums() -> None:
    metrics, registry = fresh()
    metrics.scans.labels(trigger=ScanTrigger.MANUAL, result=ScanResult.COMPLETE).inc()
    with pytest.raises(ValueError, match="not in the declared set"):
        metrics.scans.labels(trigger="tenant-a-site-1-cam", result="complete")
    with pytest.raises(ValueError, match="not in the declared set"):
        metrics.last_scan_paths.labels(media_server="mtx-a", **{"class": "rtsp://cam"})
    with pytest.raises(ValueError, match="not in the declared set"):
        metrics.last_scan_paths.labels(media_server="http://10.0.0.9:9997", **{"class": "observed"})
    found = samples(registry)
    assert value(found, "orphan_scans_total", trigger="manual", result="complete") == 1
    body = render_latest(registry)[0].decode()
    assert "tenant-a-site-1-cam" not in body
    assert "rtsp://" not in body


def test_two_registries_do_not_collide() -> None:
    first, _ = fresh()
    _, registry = fresh()
    first.set_apply_totals({"blocked": 9, "deleted": 9, "failed": 9})
    assert value(samples(registry), "orphan_apply_blocked_total") == 0
