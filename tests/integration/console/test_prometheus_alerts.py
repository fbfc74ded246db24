"""The console reads a real Prometheus's alerts (`/api/v1/alerts` of the stack's build): a firing and a
pending alert with the labels the overview shows, and an answer identical, key for key, to what the console's
unit tests serve as their fake Prometheus (`tests.support.prometheus_server.alerts_answer`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from console.adapters.apis import PROMETHEUS, Apis, PrometheusAlerts
from console.domain.alerts import Alert, AlertState
from console.service_layer.overview import alerts
from tests.support.prometheus_server import alert_entry, alerts_answer, private_prometheus

ALERTS_WITHIN_SECONDS = 30.0
# Prometheus's own `up` series: an alert with real `job` and `instance` labels, with no other target.
RULES = {
    "groups": [
        {
            "name": "console-probe",
            "rules": [
                {"alert": "ProbeFiring", "expr": 'up{job="prometheus"} == 1', "labels": {"severity": "page"},
                 "annotations": {"summary": "Prometheus is up"}},
                {"alert": "ProbePending", "expr": 'up{job="prometheus"} == 1', "for": "1h",
                 "labels": {"severity": "warn"}},
            ],
        }
    ]
}  # fmt: skip


async def test_firing_and_pending_alerts_are_read_with_their_labels_and_since(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(RULES), encoding="utf-8")
    async with private_prometheus(tmp_path / "p", rule_files=[rules], self_scrape=True) as prometheus:
        before = datetime.now(UTC)

        async def both() -> dict[str, Any] | None:
            answer: dict[str, Any] = (await prometheus.http.get(f"{prometheus.url}/api/v1/alerts")).json()
            return answer if len(answer["data"]["alerts"]) == 2 else None

        answer = await prometheus.until("a firing and a pending alert", both, ALERTS_WITHIN_SECONDS)
        apis = Apis(urls={PROMETHEUS: prometheus.url})
        try:
            read = await alerts(PrometheusAlerts(apis))
        finally:
            await apis.aclose()
    instance = prometheus.url.removeprefix("http://")
    assert read is not None and read.reachable
    since = {alert.name: alert.since for alert in read.alerts}
    assert [a.name for a in read.firing] == ["ProbeFiring"]
    assert read.firing == [
        Alert("ProbeFiring", AlertState.FIRING, since["ProbeFiring"], "page", "prometheus", instance)
    ]
    assert read.pending == [
        Alert("ProbePending", AlertState.PENDING, since["ProbePending"], "warn", "prometheus", instance)
    ]
    assert all(
        before - timedelta(seconds=ALERTS_WITHIN_SECONDS) < t <= datetime.now(UTC) for t in since.values()
    )
    by_name = {a["labels"]["alertname"]: a for a in answer["data"]["alerts"]}
    labels = {"instance": instance, "job": "prometheus"}
    fake = alerts_answer(
        alert_entry("ProbeFiring", "firing", by_name["ProbeFiring"]["activeAt"],
                    {**labels, "severity": "page"}, {"summary": "Prometheus is up"}),
        alert_entry("ProbePending", "pending", by_name["ProbePending"]["activeAt"],
                    {**labels, "severity": "warn"}),
    )  # fmt: skip
    answer["data"]["alerts"].sort(key=lambda a: a["labels"]["alertname"])
    assert answer == fake
