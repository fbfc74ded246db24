"""One check of a claimed watcher (`CheckRunner`) on the fakes: judging per mode, the baseline, triggers
and their events, failures with backoff and auto-disable, lost leases, unreadable secrets and unexpected
exceptions (every failure is recorded, none crashes a check)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from signal_watcher.adapters.memory import MemoryProbe, MemorySignalDatabase
from signal_watcher.domain.model import AUTO_DISABLE_FAILURES, CompareMode, Header, Status
from signal_watcher.domain.probes import ProbeResponse
from signal_watcher.domain.ssrf import STRICT_GUARD, parse_networks
from signal_watcher.service_layer import checks
from signal_watcher.service_layer.checks import CheckRunner
from signal_watcher.service_layer.metrics import SignalMetrics
from tests.support.signal_watcher_fixtures import use_cases_on
from tests.unit.signal_watcher.conftest import (
    NAMES,
    SITE,
    check_now,
    checks_of,
    cipher_for,
    decoded,
    insert,
    make_due,
    make_spec,
    stored,
    url,
)
from yovision_platform.messaging import AvroSerde


async def test_hash_mode_baseline_then_no_change_then_one_trigger(
    database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner, serde: AvroSerde
) -> None:
    probe.answer(url("/text"), body=b"v1")
    watcher = await insert(database, "user-1", make_spec(url("/text")))
    first = await check_now(database, runner, watcher.id)
    assert first is not None and not first.changed and first.prompt is None
    second = await check_now(database, runner, watcher.id)
    assert second is not None and not second.changed
    assert decoded(database, serde) == []
    probe.answer(url("/text"), body=b"v2")
    third = await check_now(database, runner, watcher.id)
    assert third is not None and third.changed
    events = decoded(database, serde)
    assert [(t, e) for t, e, _ in events] == [("signal.trigger.v1", "WatcherTriggered")]
    payload = events[0][2]
    assert payload["watcher_id"] == str(watcher.id) and payload["user_id"] == "user-1"
    assert payload["agent_id"] == "agent-1" and payload["warning"] is None
    assert payload["rendered_prompt"].startswith(
        "watch changed: [response body, first 500 chars]\nold:\nv1\n---\nnew:\nv2"
    )
    rows = await checks_of(database, watcher.id)
    assert [c.changed for c in rows] == [True, False, False]
    assert str(rows[0].trigger_id) == payload["trigger_id"] and str(rows[0].id) == payload["check_id"]
    record = await stored(database, "user-1", watcher.id)
    assert record.last_changed_at is not None and record.consecutive_failures == 0


async def test_json_field_mode_triggers_with_old_and_new_field_values(
    database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner, serde: AvroSerde
) -> None:
    def serve(document: object) -> None:
        probe.answer(url("/json"), body=json.dumps(document).encode())

    serve({"data": {"items": [{"price": 10}], "noise": 1}})
    spec = make_spec(url("/json"), compare_mode=CompareMode.JSON_FIELD, json_path="data.items.0.price")
    watcher = await insert(database, "user-1", spec)
    await check_now(database, runner, watcher.id)
    serve({"data": {"items": [{"price": 10}], "noise": 2}})
    assert not (await check_now(database, runner, watcher.id)).changed  # type: ignore[union-attr]
    serve({"data": {"items": [{"price": 12}], "noise": 2}})
    assert (await check_now(database, runner, watcher.id)).changed  # type: ignore[union-attr]
    [(_, _, payload)] = decoded(database, serde)
    assert payload["rendered_prompt"] == "watch changed: [field data.items.0.price] old: 10 -> new: 12"
    serve({"data": {"items": []}})
    failed = await check_now(database, runner, watcher.id)
    assert failed is not None and failed.error_code == "json_path_missing" and failed.failures == 1


async def test_status_code_mode_triggers_on_a_new_code_only(
    database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner, serde: AvroSerde
) -> None:
    watcher = await insert(database, "user-1", make_spec(url("/text"), compare_mode=CompareMode.STATUS_CODE))
    probe.answer(url("/text"), status=200, body=b"a")
    await check_now(database, runner, watcher.id)
    probe.answer(url("/text"), status=200, body=b"b")
    assert not (await check_now(database, runner, watcher.id)).changed  # type: ignore[union-attr]
    probe.answer(url("/text"), status=503, body=b"b")
    assert (await check_now(database, runner, watcher.id)).changed  # type: ignore[union-attr]
    [(_, _, payload)] = decoded(database, serde)
    assert payload["rendered_prompt"] == "watch changed: [HTTP status] 200 -> 503"


async def test_probe_or_judging_edits_reset_the_baseline_and_other_edits_do_not(
    database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner, serde: AvroSerde
) -> None:
    probe.answer(url("/text"), body=b"v1")
    watcher = await insert(database, "user-1", make_spec(url("/text")))
    await check_now(database, runner, watcher.id)
    async with database() as uow:
        renamed = make_spec(watcher.spec.url, name="renamed", interval_minutes=99)
        kept = await uow.watchers.update_spec("user-1", watcher.id, renamed, reset_baseline=False)
    assert kept is not None and kept.last_value_hash is not None and kept.spec.name == "renamed"
    async with database() as uow:
        with_header = make_spec(watcher.spec.url, headers=(Header("X-A", "1"),))
        reset = await uow.watchers.update_spec("user-1", watcher.id, with_header, reset_baseline=True)
    assert reset is not None and reset.last_value_hash is None and reset.last_changed_at is None
    probe.answer(url("/text"), body=b"v2")
    rebuilt = await check_now(database, runner, watcher.id)
    assert rebuilt is not None and not rebuilt.changed  # a new baseline, not a change
    assert decoded(database, serde) == []


async def test_failures_back_off_then_disable_once_with_one_notification(
    database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner, serde: AvroSerde
) -> None:
    probe.answer(url("/redirect"), status=302)
    watcher = await insert(database, "user-1", make_spec(url("/redirect"), interval_minutes=3))
    backoffs = []
    for _ in range(AUTO_DISABLE_FAILURES):
        decision = await check_now(database, runner, watcher.id)
        assert decision is not None and decision.error_code == "redirect"
        record = await stored(database, "user-1", watcher.id)
        assert record.last_checked_at is not None
        backoffs.append(round((record.next_check_at - record.last_checked_at).total_seconds() / 60))
    assert backoffs == [6, 12, 24, 48, 96]
    record = await stored(database, "user-1", watcher.id)
    assert record.status is Status.DISABLED and record.consecutive_failures == AUTO_DISABLE_FAILURES
    events = decoded(database, serde)
    assert [(t, e) for t, e, _ in events] == [("signal.notification.v1", "WatcherDisabled")]
    assert events[0][2]["consecutive_failures"] == 5 and events[0][2]["last_error_code"] == "redirect"
    assert events[0][2]["notification_kind"] == "WATCHER_DISABLED"
    async with database() as uow:  # a disabled watcher is never claimed again
        assert await uow.watchers.claim_due("x", limit=10, lease_seconds=60) == []
        enabled = await uow.watchers.set_status("user-1", watcher.id, Status.ACTIVE)
    assert enabled is not None and enabled.consecutive_failures == 0 and enabled.last_value_hash is None
    assert enabled.status is Status.ACTIVE


async def test_success_resets_failures(
    database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner
) -> None:
    probe.answer(url("/status/404"), status=404)
    probe.answer(url("/redirect"), status=302)
    watcher = await insert(database, "user-1", make_spec(url("/status/404")))
    async with database() as uow:
        await uow.watchers.update_spec("user-1", watcher.id, make_spec(url("/redirect")), reset_baseline=True)
    await check_now(database, runner, watcher.id)
    await check_now(database, runner, watcher.id)
    assert (await stored(database, "user-1", watcher.id)).consecutive_failures == 2
    async with database() as uow:
        await uow.watchers.update_spec("user-1", watcher.id, make_spec(watcher.spec.url), reset_baseline=True)
    ok = await check_now(database, runner, watcher.id)
    assert ok is not None and ok.error_code is None
    record = await stored(database, "user-1", watcher.id)
    assert record.consecutive_failures == 0 and record.last_checked_at is not None
    assert round((record.next_check_at - record.last_checked_at).total_seconds() / 60) == 10


async def test_a_check_is_dated_when_it_is_written_however_long_its_probe_takes(
    database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`checked_at` is when the check was written (the API's contract), 45 s of probe after its claim; the
    next check is due one interval after that."""
    probe.answer(url("/text"), body=b"v1")
    spec = make_spec(url("/text"))
    watcher = await insert(database, "user-1", spec)
    answer = probe.probe

    async def slow(method: str, target: str, headers: Sequence[Header], body: str | None) -> ProbeResponse:
        database.clock.advance(45)
        return await answer(method, target, headers, body)

    monkeypatch.setattr(probe, "probe", slow)
    make_due(database, watcher.id, days_ago=1)
    async with database() as uow:
        [claimed] = await uow.watchers.claim_due("x", limit=10, lease_seconds=120)
        claimed_at = await uow.now()
    assert await runner.run(claimed) is not None
    [row] = await checks_of(database, watcher.id)
    record = await stored(database, "user-1", watcher.id)
    written = row.checked_at
    assert written == record.last_checked_at and written >= claimed_at + timedelta(seconds=45)
    assert record.next_check_at == written + timedelta(minutes=spec.interval_minutes)


async def test_pausing_during_a_probe_discards_its_result(
    database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner
) -> None:
    probe.answer(url("/redirect"), status=302)
    watcher = await insert(database, "user-1", make_spec(url("/redirect")))
    for _ in range(AUTO_DISABLE_FAILURES - 1):
        await check_now(database, runner, watcher.id)
    async with database() as uow:
        await uow.watchers.request_check("user-1", watcher.id, min_spacing_seconds=0)
        [claimed] = await uow.watchers.claim_due("x", limit=10, lease_seconds=60)
        await uow.watchers.set_status("user-1", watcher.id, Status.PAUSED)
    assert await runner.run(claimed) is None
    record = await stored(database, "user-1", watcher.id)
    assert record.status is Status.PAUSED and record.consecutive_failures == AUTO_DISABLE_FAILURES - 1
    assert len(await checks_of(database, watcher.id)) == AUTO_DISABLE_FAILURES - 1  # nothing written


async def test_an_edit_while_probing_discards_the_result(
    database: MemorySignalDatabase,
    probe: MemoryProbe,
    runner: CheckRunner,
    serde: AvroSerde,
    registry: CollectorRegistry,
) -> None:
    """The edit lands between the probe and the write: the check's transaction finds its lease gone and
    writes nothing, check row and event included."""
    probe.answer(url("/text"), body=b"v1")
    watcher = await insert(database, "user-1", make_spec(url("/text")))
    await check_now(database, runner, watcher.id)
    probe.answer(url("/text"), body=b"v2")
    real_probe = probe.probe

    async def probe_then_edit(*args: object) -> object:
        response = await real_probe(*args)  # type: ignore[arg-type]
        async with database() as uow:
            await uow.watchers.update_spec(
                "user-1", watcher.id, make_spec(url("/text")), reset_baseline=False
            )
        return response

    probe.probe = probe_then_edit  # type: ignore[method-assign]
    assert await check_now(database, runner, watcher.id) is None
    assert len(await checks_of(database, watcher.id)) == 1 and decoded(database, serde) == []
    assert registry.get_sample_value("signal_checks_total", {"outcome": "discarded"}) == 1


async def test_fifth_trigger_within_an_hour_is_marked_rate_limited(
    database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner, serde: AvroSerde
) -> None:
    watcher = await insert(database, "user-1", make_spec(url("/text")))
    for i in range(6):
        probe.answer(url("/text"), body=f"v{i}".encode())
        await check_now(database, runner, watcher.id)
    warnings = [payload["warning"] for _, _, payload in decoded(database, serde)]
    assert warnings == [None, None, None, None, "TRIGGER_RATE_LIMITED"]
    rows = await checks_of(database, watcher.id)
    assert rows[0].warning == "TRIGGER_RATE_LIMITED" and rows[0].error_code is None


async def test_metrics_count_outcomes_with_fixed_labels_only(
    database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner, registry: CollectorRegistry
) -> None:
    probe.answer(url("/text"), body=b"a")
    probe.answer(url("/redirect"), status=302)
    watcher = await insert(database, "user-1", make_spec(url("/text")))
    broken = await insert(database, "user-1", make_spec(url("/redirect")))
    await check_now(database, runner, watcher.id)
    probe.answer(url("/text"), body=b"b")
    await check_now(database, runner, watcher.id)
    await check_now(database, runner, broken.id)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("signal_checks_total", outcome="baseline") == 1
    assert value("signal_checks_total", outcome="changed") == 1
    assert value("signal_checks_total", outcome="failed") == 1
    assert value("signal_check_failures_total", code="redirect") == 1
    assert value("signal_triggers_total", rate_limited="false") == 1
    rendered = b"".join(generate_latest(registry).splitlines())
    assert SITE.encode() not in rendered and b"user-1" not in rendered


async def test_a_probe_outside_the_confinement_is_a_recorded_failure_with_its_own_label(
    database: MemorySignalDatabase, serde: AvroSerde, registry: CollectorRegistry
) -> None:
    """A watcher stored before the confinement (or whose name now resolves outside it): the check fails with
    `probe_network_confined`, counted under that fixed label; nothing reaches the target."""
    confined = MemoryProbe(guard=STRICT_GUARD.confined_to(parse_networks("127.0.0.0/8")), names=NAMES)
    confined.answer(url("/text"), body=b"a")
    runner = use_cases_on(database, confined, metrics=SignalMetrics.create(registry)).check_runner
    watcher = await insert(database, "user-1", make_spec(url("/text")))
    decision = await check_now(database, runner, watcher.id)
    assert decision is not None and decision.error_code == "probe_network_confined"
    assert [c.error_code for c in await checks_of(database, watcher.id)] == ["probe_network_confined"]
    assert (await stored(database, "user-1", watcher.id)).consecutive_failures == 1
    labels = {"code": "probe_network_confined"}
    assert registry.get_sample_value("signal_check_failures_total", labels) == 1
    assert registry.get_sample_value("signal_check_failures_total", {"code": "other"}) == 0
    assert confined.requests == {}


async def test_unreadable_secrets_are_a_recorded_failure_that_disables_the_watcher(
    database: MemorySignalDatabase, probe: MemoryProbe, serde: AvroSerde
) -> None:
    probe.answer(url("/text"), body=b"v1")
    spec = make_spec(url("/text"), headers=(Header("Authorization", "Bearer sec-" + "7" * 20),))
    watcher = await insert(database, "user-1", spec)
    # the key that wrote the secrets is no longer in the ring: no probe, a failure with a stable code
    other = database.reading_with(cipher_for(os.urandom(32), key_id="k9"))
    runner = use_cases_on(other, probe).check_runner
    for _ in range(AUTO_DISABLE_FAILURES):
        decision = await check_now(other, runner, watcher.id)
        assert decision is not None and decision.error_code == "secret_key_unknown"
    rows = await checks_of(other, watcher.id)
    assert [c.error_code for c in rows] == ["secret_key_unknown"] * AUTO_DISABLE_FAILURES
    record = database.tables.watchers[watcher.id].record
    assert (record.status, record.consecutive_failures) == (Status.DISABLED, AUTO_DISABLE_FAILURES)
    assert all(c.http_status is None and c.duration_ms is None for c in rows)  # nothing was probed
    assert probe.requests == {}


async def test_a_tampered_ciphertext_is_a_recorded_failure_too(
    database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner
) -> None:
    watcher = await insert(database, "user-1", make_spec(url("/text")))
    row = database.tables.watchers[watcher.id]
    damaged = bytearray(row.secrets.headers)
    damaged[29] ^= 0xFF
    database.tables.watchers[watcher.id] = replace(row, secrets=replace(row.secrets, headers=bytes(damaged)))
    decision = await check_now(database, runner, watcher.id)
    assert decision is not None and decision.error_code == "secret_unreadable"


class _CrashingProbe(MemoryProbe):
    async def probe(self, method: str, url: str, headers: object, body: str | None) -> object:  # type: ignore[override]
        raise ValueError("a bug in the probe path, quoting https://example.com/?token=s3cret")


@pytest.mark.parametrize("fault", ["probe", "judge"])
async def test_unexpected_exceptions_while_probing_or_judging_are_recorded_failures(
    database: MemorySignalDatabase,
    serde: AvroSerde,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fault: str,
) -> None:
    expected = {"probe": "probe_internal_error", "judge": "judge_internal_error"}[fault]
    probe = _CrashingProbe() if fault == "probe" else MemoryProbe(names={SITE: ["93.184.216.34"]})
    probe.answer(url("/text"), body=b"v1")
    if fault == "judge":

        def crashing_judge(*args: object) -> object:
            raise KeyError("a bug in judging")

        monkeypatch.setattr(checks, "judge", crashing_judge)
    registry = CollectorRegistry()
    runner = use_cases_on(database, probe, metrics=SignalMetrics.create(registry)).check_runner
    record = await insert(database, "user-1", make_spec(url("/text")))
    decision = await check_now(database, runner, record.id)
    assert decision is not None and decision.error_code == expected
    rows = await checks_of(database, record.id)
    assert [c.error_code for c in rows] == [expected]
    assert (await stored(database, "user-1", record.id)).consecutive_failures == 1
    assert registry.get_sample_value("signal_check_failures_total", {"code": expected}) == 1.0
    ours = [r for r in caplog.records if r.name.startswith("signal_watcher")]
    assert all("s3cret" not in r.getMessage() and r.exc_info is None for r in ours)
    assert [getattr(r, "error_code", None) for r in ours if r.levelno == logging.ERROR] == [
        {"probe": "ValueError", "judge": "KeyError"}[fault]
    ]
