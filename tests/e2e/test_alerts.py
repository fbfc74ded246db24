"""YovisionConsumerStalled, live: a consumer of the environment stalls while its process keeps serving
/metrics, a private Prometheus with the project's alert rules fires the alert, the console's overview lists
it, and both let it go once the consumer is free again.

The stall is one an operator can cause: a long transaction holding orphan-scanner's projection tables
(`LOCK TABLE ... IN EXCLUSIVE MODE`, which reads still pass, as a manual repair or a migration would take)
while Sense publishes a device. The projection consumer's handler waits on the lock inside its round, so
`consumer_last_poll_timestamp_seconds` stands still while the HTTP side answers. The test's connection is
the read-only admin one: it changes nothing, it only holds the lock.

The rule waits 120 s, then 2 m: too long for the suite. Prometheus loads a copy of
infra/prometheus/alerts.yml written here in which only that rule's threshold and `for` are scaled down
(`scaled_rules`: everything else, the expression included, is asserted identical), scrapes the environment's
services as `make up`'s Prometheus does (`services.sh targets`, job = service) every second and evaluates
every second. Why this and not a time-warped test: docs/decisions.md ("The live alert test").
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import yaml

from tests.e2e.console_browser import (
    OPERATOR_PERMISSIONS,
    Visitor,
    all_secrets,
    assert_nothing_secret_rendered,
)
from tests.support.e2e_fixtures import FLOW_TIMEOUT_SECONDS, Witness, camera_source, device_body
from tests.support.prometheus_server import PrivatePrometheus, private_prometheus
from yovision_platform.tools.environment import LocalEnvironment

REPO_ROOT = Path(__file__).resolve().parents[2]
RULES = REPO_ROOT / "infra" / "prometheus" / "alerts.yml"
ALERT = "YovisionConsumerStalled"
RULE_THRESHOLD = "120"  # seconds, in the rule's expression
RULE_FOR = "2m"
# A healthy round takes about 0.5 s; a sample is up to one scrape old when evaluated one interval later.
SCALED_THRESHOLD = "5"
SCALED_FOR = "2s"
INTERVAL_SECONDS = 1.0
STALLED = "orphan-scanner"
LOCKED_TABLES = ("device_claims", "path_ownership")  # what the projection's handler writes


def _without_scaled_parts(document: dict[str, Any]) -> dict[str, Any]:
    """The document with the stalled rule's threshold and `for` taken out (its expression up to `>`)."""
    rest = copy.deepcopy(document)
    (rule,) = [r for g in rest["groups"] for r in g["rules"] if r.get("alert") == ALERT]
    rule["expr"] = rule["expr"].rsplit(">", 1)[0]
    del rule["for"]
    return rest


def scaled_rules(original: str) -> dict[str, Any]:
    """alerts.yml with YovisionConsumerStalled's `> 120` and `for: 2m` scaled down; nothing else changed."""
    real: dict[str, Any] = yaml.safe_load(original)
    scaled = copy.deepcopy(real)
    (rule,) = [r for g in scaled["groups"] for r in g["rules"] if r.get("alert") == ALERT]
    head, threshold = rule["expr"].rsplit(">", 1)
    assert (threshold.strip(), rule["for"]) == (RULE_THRESHOLD, RULE_FOR), "the rule changed: rescale it"
    rule["expr"], rule["for"] = f"{head}> {SCALED_THRESHOLD}", SCALED_FOR
    assert _without_scaled_parts(scaled) == _without_scaled_parts(real)
    changed = [
        (r["alert"], key)
        for g_real, g_scaled in zip(real["groups"], scaled["groups"], strict=True)
        for r, s in zip(g_real["rules"], g_scaled["rules"], strict=True)
        for key in sorted(set(r) | set(s))
        if r.get(key) != s.get(key)
    ]
    assert changed == [(ALERT, "expr"), (ALERT, "for")]
    return scaled


@pytest.fixture
async def prometheus(env: LocalEnvironment, tmp_path: Path) -> AsyncIterator[PrivatePrometheus]:
    """A private Prometheus on the environment's services, with the scaled rules."""
    rules = tmp_path / "alerts.yml"
    rules.write_text(yaml.safe_dump(scaled_rules(RULES.read_text()), sort_keys=False), encoding="utf-8")
    targets = tmp_path / "services.json"
    await env.services_script("targets", str(targets), within_seconds=FLOW_TIMEOUT_SECONDS)
    services = {
        "job_name": "services",
        "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "1s"}],
    }
    async with private_prometheus(
        tmp_path / "prometheus",
        rule_files=[rules],
        scrape_configs=[services],
        interval_seconds=INTERVAL_SECONDS,
    ) as server:
        yield server


@pytest.fixture
async def console_on_prometheus(env: LocalEnvironment, prometheus: PrivatePrometheus) -> AsyncIterator[None]:
    """The environment's console restarted with `CONSOLE_PROMETHEUS_URL` (and back without it after)."""
    env.set_setting("console", "CONSOLE_PROMETHEUS_URL", prometheus.url)
    await env.stop("console")
    await env.start("console")
    try:
        yield
    finally:
        env.set_setting("console", "CONSOLE_PROMETHEUS_URL", None)
        await env.stop("console")
        await env.start("console")


def stalled_alerts(alerts: list[dict[str, Any]], state: str) -> list[dict[str, Any]]:
    return [
        a for a in alerts
        if a["labels"]["alertname"] == ALERT and a["labels"].get("job") == STALLED and a["state"] == state
    ]  # fmt: skip


async def firing_row(visitor: Visitor) -> list[str]:
    """The overview's firing-alert rows of the stalled consumer, as text (reloaded)."""
    page = await visitor.open("/")
    rows = page.locator(f'#alerts-firing tr[data-alert="{ALERT}"]')
    return [text for text in await rows.all_inner_texts() if STALLED in text]


async def test_a_stalled_consumer_fires_the_alert_on_prometheus_and_the_console_until_it_is_free(
    env: LocalEnvironment,
    prometheus: PrivatePrometheus,
    console_on_prometheus: None,
    visitor_factory: Any,
    sense: httpx.AsyncClient,
    admin_db: asyncpg.Connection,
    witness: Witness,
) -> None:
    loaded = await prometheus.until(
        "the scaled rule evaluated", lambda: _evaluated(prometheus), FLOW_TIMEOUT_SECONDS
    )
    (scaled,) = [
        r for g in scaled_rules(RULES.read_text())["groups"] for r in g["rules"] if r.get("alert") == ALERT
    ]
    assert (loaded["query"], loaded["duration"]) == (scaled["expr"], 2)

    async def scraped() -> list[Any] | None:
        query = f'consumer_last_poll_timestamp_seconds{{job="{STALLED}"}}'
        return (await prometheus.api("/api/v1/query", query=query))["result"] or None

    (series,) = await prometheus.until(f"{STALLED}'s last poll scraped", scraped, FLOW_TIMEOUT_SECONDS)
    instance = series["metric"]["instance"]
    assert instance == f"127.0.0.1:{env.service(STALLED).port}"
    assert not stalled_alerts(await prometheus.alerts(), "firing"), "firing before the stall"

    visitor: Visitor = await visitor_factory(env.url("console"), "alerts")
    await visitor.sign_in(f"al-{uuid.uuid4().hex[:6]}", *OPERATOR_PERMISSIONS)
    assert await firing_row(visitor) == []

    schema = env.service(STALLED).schema
    tables = ", ".join(f'"{schema}".{table}' for table in LOCKED_TABLES)
    async with admin_db.transaction():
        await admin_db.execute(f"LOCK TABLE {tables} IN EXCLUSIVE MODE")
        source = camera_source(witness, "10.27.0.1")
        path = f"stall-{uuid.uuid4().hex[:8]}"
        body = device_body(f"t-{uuid.uuid4().hex[:6]}", "s-1", path, source, state="disabled")
        assert (await sense.post("/v1/devices", json=body)).status_code == 201

        async def firing() -> list[dict[str, Any]] | None:
            return stalled_alerts(await prometheus.alerts(), "firing") or None

        (alert,) = await prometheus.until(f"{ALERT} firing", firing, FLOW_TIMEOUT_SECONDS)
        assert alert["labels"] == {
            "alertname": ALERT,
            "job": STALLED,
            "instance": instance,
            "severity": "page",
        }
        waiting = await admin_db.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND wait_event_type = 'Lock'",
            f"{schema}_app",
        )
        assert waiting == 1, "the projection consumer waits on the lock, and nothing else"
        (row,) = await firing_row(visitor)
        assert "page" in row and instance in row
        await visitor.look("alert-firing")

    async def resolved() -> bool | None:
        alerts = await prometheus.alerts()
        return True if not stalled_alerts(alerts, "firing") + stalled_alerts(alerts, "pending") else None

    await prometheus.until(f"{ALERT} resolved", resolved, FLOW_TIMEOUT_SECONDS)
    assert await firing_row(visitor) == []
    await visitor.look("alert-resolved")
    await assert_nothing_secret_rendered(visitor, all_secrets(env, witness))


async def _evaluated(prometheus: PrivatePrometheus) -> dict[str, Any] | None:
    rules = {rule["name"]: rule for rule in await prometheus.alert_rules()}
    rule = rules.get(ALERT)
    return rule if rule is not None and rule["health"] == "ok" else None
