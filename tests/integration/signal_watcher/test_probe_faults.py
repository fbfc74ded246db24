"""A failure of the resolver itself (a port: any failure of it means "no usable answer") is the recorded
probe failure `dns`, like a name that does not resolve: a check row, one more consecutive failure, the
metric, and no log line that quotes the URL. (The other unexpected failures, a probe or judging bug, are
use-case behaviour: tests/unit/signal_watcher/test_check_runner.py.)"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.domain.ssrf import IpAddress
from signal_watcher.service_layer.metrics import SignalMetrics
from tests.support.fixture_server import FixtureServer
from tests.support.signal_watcher_fixtures import (
    FIXTURE_HOST,
    LOOPBACK_FOR_TESTS,
    check_now,
    checks_of,
    insert,
    make_spec,
    stored,
    use_cases_on,
)
from yovision_platform.messaging import AvroSerde


async def _crashing_resolver(host: str, port: int) -> list[IpAddress]:
    raise RuntimeError("resolver bug")


async def test_a_crashing_resolver_is_a_recorded_dns_failure(
    fixture_server: FixtureServer,
    units: PostgresUnitsOfWork,
    serde: AvroSerde,
    caplog: pytest.LogCaptureFixture,
) -> None:
    probe = ProbeClient(resolver=_crashing_resolver, guard=LOOPBACK_FOR_TESTS)
    registry = CollectorRegistry()
    runner = use_cases_on(units, probe, metrics=SignalMetrics.create(registry)).check_runner
    record = await insert(units, "user-1", make_spec(fixture_server.url(FIXTURE_HOST, "/text")))
    try:
        decision = await check_now(units, runner, record.id)
    finally:
        await probe.aclose()
    assert decision is not None and decision.error_code == "dns"
    assert [c.error_code for c in await checks_of(units, record.id)] == ["dns"]
    assert (await stored(units, "user-1", record.id)).consecutive_failures == 1
    assert registry.get_sample_value("signal_check_failures_total", {"code": "dns"}) == 1.0
    ours = [r for r in caplog.records if r.name.startswith("signal_watcher")]
    assert all("s3cret" not in r.getMessage() and r.exc_info is None for r in ours)
    assert fixture_server.requests["/text"] == 0
