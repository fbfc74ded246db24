"""The alert rules of infra/prometheus/alerts.yml and the metric names their expressions use (the contract
tests check them with promtool; the end-to-end tests against the metrics the services export)."""

from __future__ import annotations

import re

from tests.support.stack import REPO_ROOT

ALERT_RULES = REPO_ROOT / "infra" / "prometheus" / "alerts.yml"
PROMQL_WORDS = frozenset({"and", "or", "unless", "by", "without", "on", "ignoring", "bool"})


def metric_names_in_rules(text: str) -> set[str]:
    """The metric names the rules' expressions use (label matchers and grouping clauses removed)."""
    names: set[str] = set()
    for expr in re.findall(r"expr:\s*(>\s*\n(?:\s{10,}.*\n)+|.*)", text):
        body = re.sub(r"\{[^}]*\}", "", expr)
        body = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", "", body)
        body = re.sub(r"\[[^\]]*\]", "", body)
        for token in re.findall(r"\b([a-z_][a-z0-9_]*)\b(?!\s*\()", body):
            if token not in PROMQL_WORDS:
                names.add(token)
    return names
