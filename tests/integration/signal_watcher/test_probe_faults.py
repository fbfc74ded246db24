"""Every probe failure, expected or not, is a recorded failure: a check row, one more consecutive failure,
and auto-disable at the fifth. Nothing crashes a check or answers 500."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from signal_watcher.adapters.probe_client import ProbeClient, ProbeResponse
from signal_watcher.adapters.repository import WatcherRecord, WatcherRepository
from signal_watcher.domain.model import AUTO_DISABLE_FAILURES, Header, Status
from signal_watcher.domain.ssrf import IpAddress
from signal_watcher.metrics import SignalMetrics
from signal_watcher.service_layer import checks
from signal_watcher.service_layer.checks import CheckRunner
from signal_watcher.service_layer.scheduler import Scheduler
from tests.integration.signal_watcher.conftest import (
    FIXTURE_HOST,
    LOOPBACK_FOR_TESTS,
    check_now,
    fake_resolver,
    make_due,
    make_spec,
    outbox_events,
)
from tests.integration.signal_watcher.fixture_server import FixtureServer
from yovision_platform.avro import AvroSerde


async def _insert_unchecked(pool: asyncpg.Pool, repo: WatcherRepository, url: str) -> WatcherRecord:
    """A watcher whose URL skipped validation, as rows written before a rule existed can."""
    spec = dataclasses.replace(make_spec("https://example.com/"), url=url)
    async with pool.acquire() as conn:
        return await repo.insert(conn, "user-1", spec)


async def _watcher_and_checks(
    pool: asyncpg.Pool, repo: WatcherRepository, record: WatcherRecord
) -> tuple[WatcherRecord, list[str | None]]:
    async with pool.acquire() as conn:
        current = await repo.get(conn, "user-1", record.id)
        rows = await repo.list_checks(conn, record.id, limit=100, offset=0)
    assert current is not None
    return current, [r.error_code for r in rows]


@pytest.mark.parametrize("port", ["65536", "0", "12345678901234567890"])
async def test_a_stored_watcher_with_a_bad_port_fails_each_scheduled_check_until_disabled(
    pool: asyncpg.Pool, repo: WatcherRepository, runner: CheckRunner, serde: AvroSerde, port: str
) -> None:
    record = await _insert_unchecked(pool, repo, f"http://{FIXTURE_HOST}:{port}/")
    scheduler = Scheduler(pool, repo, runner, "instance-a")
    for round_number in range(1, AUTO_DISABLE_FAILURES + 1):
        await make_due(pool, repo.schema, record.id)
        assert await scheduler.scan() == 1
        await scheduler.drain(30)
        current, codes = await _watcher_and_checks(pool, repo, record)
        assert codes == ["url_refused"] * round_number
        assert current.consecutive_failures == round_number
    assert scheduler.checks_done == AUTO_DISABLE_FAILURES
    assert current.status is Status.DISABLED
    events = await outbox_events(pool, repo.schema, serde)
    assert [(e, p["last_error_code"]) for _, e, p in events] == [("WatcherDisabled", "url_refused")]


class _CrashingProbe(ProbeClient):
    async def probe(
        self, method: str, url: str, headers: Sequence[Header], body: str | None
    ) -> ProbeResponse:
        raise ValueError("a bug in the probe path, quoting https://example.com/?token=s3cret")


async def _crashing_resolver(host: str, port: int) -> list[IpAddress]:
    raise RuntimeError("resolver bug")


@pytest.mark.parametrize("fault", ["resolver", "probe", "judge"])
async def test_unexpected_exceptions_while_probing_or_judging_are_recorded_failures(
    fixture_server: FixtureServer,
    pool: asyncpg.Pool,
    repo: WatcherRepository,
    serde: AvroSerde,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fault: str,
) -> None:
    expected = {"resolver": "dns", "probe": "probe_internal_error", "judge": "judge_internal_error"}[fault]
    if fault == "resolver":
        probe: ProbeClient = ProbeClient(resolver=_crashing_resolver, guard=LOOPBACK_FOR_TESTS)
    elif fault == "probe":
        probe = _CrashingProbe(guard=LOOPBACK_FOR_TESTS)
    else:
        probe = ProbeClient(resolver=fake_resolver({FIXTURE_HOST: ["127.0.0.1"]}), guard=LOOPBACK_FOR_TESTS)

        def crashing_judge(*args: object) -> object:
            raise KeyError("a bug in judging")

        monkeypatch.setattr(checks, "judge", crashing_judge)
    registry = CollectorRegistry()
    runner = CheckRunner(pool, repo, probe, serde, metrics=SignalMetrics.create(registry))
    record = await _insert_unchecked(pool, repo, fixture_server.url(FIXTURE_HOST, "/text"))
    try:
        decision = await check_now(pool, repo, runner, record.id)
    finally:
        await probe.aclose()
    assert decision is not None and decision.error_code == expected
    current, codes = await _watcher_and_checks(pool, repo, record)
    assert codes == [expected] and current.consecutive_failures == 1
    assert registry.get_sample_value("signal_check_failures_total", {"code": expected}) == 1.0
    ours = [r for r in caplog.records if r.name.startswith("signal_watcher")]
    assert all("s3cret" not in r.getMessage() and r.exc_info is None for r in ours)
    if fault != "resolver":  # a resolver failure is the expected `dns`; the others are bugs, logged by class
        assert [getattr(r, "error_code", None) for r in ours if r.levelno == logging.ERROR] == [
            {"probe": "ValueError", "judge": "KeyError"}[fault]
        ]
