"""signal-watcher metrics. Labels come only from the fixed sets below: never user, URL or error text."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram

from yovision_platform.observability import LabeledMetric, labeled_counter, labeled_histogram

__all__ = ["FAILURE_CODES", "CheckOutcome", "SignalMetrics"]

FAILURE_CODES = frozenset(
    {
        "timeout",
        "too_large",
        "redirect",
        "connect_refused",
        "connect_failed",
        "dns",
        "ssrf_blocked",
        "probe_network_confined",
        "url_refused",
        "tls",
        "protocol_error",
        "json_parse_error",
        "secret_unreadable",
        "secret_key_unknown",
        "json_path_missing",
        "json_value_null",
        "probe_internal_error",
        "judge_internal_error",
        "other",
    }
)
PROBE_BUCKETS_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0)


class CheckOutcome(enum.StrEnum):
    BASELINE = "baseline"
    UNCHANGED = "unchanged"
    CHANGED = "changed"
    FAILED = "failed"
    DISCARDED = "discarded"  # the lease was lost (edit, pause, delete during the probe): nothing written


@dataclass(frozen=True)
class SignalMetrics:
    checks: LabeledMetric[Counter]
    failures: LabeledMetric[Counter]
    triggers: LabeledMetric[Counter]
    disabled: LabeledMetric[Counter]
    probe_seconds: LabeledMetric[Histogram]

    @classmethod
    def create(cls, registry: CollectorRegistry) -> SignalMetrics:
        metrics = cls(
            checks=labeled_counter(
                registry, "signal_checks_total", "Checks by outcome.", {"outcome": CheckOutcome}
            ),
            failures=labeled_counter(
                registry,
                "signal_check_failures_total",
                "Failed checks by stable code.",
                {"code": FAILURE_CODES},
            ),
            triggers=labeled_counter(
                registry,
                "signal_triggers_total",
                "Agent-run requests written to the outbox.",
                {"rate_limited": frozenset({"true", "false"})},
            ),
            disabled=labeled_counter(
                registry, "signal_watchers_disabled_total", "Watchers auto-disabled after failures.", {}
            ),
            probe_seconds=labeled_histogram(
                registry,
                "signal_probe_seconds",
                "Probe duration (completed responses).",
                {},
                PROBE_BUCKETS_SECONDS,
            ),
        )
        metrics.checks.initialize_all()
        metrics.failures.initialize_all()
        metrics.triggers.initialize_all()
        return metrics

    def failure(self, code: str) -> None:
        self.failures.labels(code=code if code in FAILURE_CODES else "other").inc()
