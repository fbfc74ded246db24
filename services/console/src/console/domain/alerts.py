"""Alerts as Prometheus reports them (``GET /api/v1/alerts``), in the order the overview lists them.

An alert is `firing` (its condition held for the rule's ``for``) or `pending` (the condition holds, not yet
for long enough); Prometheus does not list inactive or resolved ones. The labels the project's rules put on
an alert (infra/prometheus/alerts.yml): ``alertname``, ``severity`` (page, warn, info), and the series'
``job`` (the service) and ``instance`` (host:port), where the rule keeps them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["Alert", "AlertState", "alerts_of"]

SEVERITY_ORDER = ("page", "warn", "info")


class AlertState(enum.StrEnum):
    FIRING = "firing"
    PENDING = "pending"


@dataclass(frozen=True)
class Alert:
    name: str
    state: AlertState
    since: datetime
    severity: str | None = None
    service: str | None = None
    instance: str | None = None

    def order(self) -> tuple[int, int, str, str, str]:
        rank = SEVERITY_ORDER.index(self.severity) if self.severity in SEVERITY_ORDER else len(SEVERITY_ORDER)
        state = 0 if self.state is AlertState.FIRING else 1
        return state, rank, self.name, self.service or "", self.instance or ""


def _alert(item: Any) -> Alert | None:
    """One entry of the answer; None for a state the overview does not list (inactive)."""
    labels = item["labels"]
    try:
        state = AlertState(item["state"])
    except ValueError:
        return None
    since = datetime.fromisoformat(str(item["activeAt"]))
    if since.tzinfo is None:
        raise ValueError("activeAt without a time zone")
    since = since.astimezone(UTC)

    def label(name: str) -> str | None:
        value = labels.get(name)
        return None if value is None else str(value)

    return Alert(
        name=str(labels["alertname"]),
        state=state,
        since=since,
        severity=label("severity"),
        service=label("job"),
        instance=label("instance"),
    )


def alerts_of(answer: Any) -> list[Alert]:
    """The alerts of a ``/api/v1/alerts`` answer (decoded JSON), firing first, then by severity and name.
    ValueError when the answer is not one (an error status, a missing field, a bad time)."""
    try:
        if answer["status"] != "success":
            raise ValueError("Prometheus answered an error")
        found = [_alert(item) for item in answer["data"]["alerts"]]
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError("not an alerts answer") from exc
    return sorted((alert for alert in found if alert is not None), key=Alert.order)
