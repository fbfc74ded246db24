"""The alert rules in infra/prometheus/ are valid (promtool check rules) and behave as their unit tests
say (promtool test rules). promtool is built from the Prometheus Go module by `make test`'s set-up."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.alert_rules import ALERT_RULES, metric_names_in_rules

REPO_ROOT = Path(__file__).resolve().parents[2]
PROMTOOL = REPO_ROOT / ".local" / "bin" / "promtool"
RULES = ALERT_RULES
RULE_TESTS = REPO_ROOT / "infra" / "prometheus" / "alerts.test.yml"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL.is_file(), "promtool missing: `make test` builds it (infra/scripts/install-promtool.sh)"
    command = [str(PROMTOOL), *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, cwd=RULES.parent)


def test_the_rules_are_valid() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_rules_pass_their_unit_tests() -> None:
    result = promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("expr: max by (job, instance) (consumer_dead_letters) > 0\n", {"consumer_dead_letters"}),
        ('expr: sum by (job) (increase(a_total{fate="x"}[1h])) > 0 or b > 1\n', {"a_total", "b"}),
    ],
)
def test_metric_names_are_read_from_expressions(expr: str, names: set[str]) -> None:
    assert metric_names_in_rules(expr) == names


def test_every_alert_names_the_metrics_it_watches() -> None:
    assert metric_names_in_rules(RULES.read_text()) == {
        "consumer_dead_letters",
        "sense_audit_push_items_total",
        "sense_reconcile_refused",
        "outbox_relay_backlog",
        "consumer_lag_messages",
        "consumer_last_poll_timestamp_seconds",
        "sense_reconcile_items_total",
        "sense_audit_push_lease_lost_total",
        "signal_watchers_disabled_total",
    }
