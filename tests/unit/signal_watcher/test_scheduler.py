"""The due scan (`Scheduler`) on the fakes: full batches are claimed again at once, a watcher is checked
once per due time, and a stored watcher that breaks a rule fails each scheduled check until disabled."""

from __future__ import annotations

import dataclasses

import pytest

from signal_watcher.adapters.memory import MemoryProbe, MemorySignalDatabase
from signal_watcher.domain.model import AUTO_DISABLE_FAILURES, CompareMode, Status
from signal_watcher.entrypoints.scheduler_worker import Scheduler
from signal_watcher.service_layer.checks import CheckRunner
from tests.unit.signal_watcher.conftest import checks_of, decoded, insert, make_due, make_spec, stored, url
from yovision_platform.messaging import AvroSerde


async def test_a_backlog_drains_in_full_batches_and_each_watcher_is_checked_once(
    database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner
) -> None:
    probe.answer(url("/status/200"), status=200)
    ids = [
        (
            await insert(
                database, "user-1", make_spec(url("/status/200"), compare_mode=CompareMode.STATUS_CODE)
            )
        ).id
        for _ in range(7)
    ]
    scheduler = Scheduler(runner, "instance-a", batch_size=3, max_in_flight=5)
    assert await scheduler.scan() == 7
    await scheduler.drain(5)
    assert scheduler.checks_done == 7 and probe.requests[url("/status/200")] == 7
    assert await scheduler.scan() == 0  # nothing due any more
    for watcher_id in ids:
        assert len(await checks_of(database, watcher_id)) == 1


@pytest.mark.parametrize("port", ["65536", "0", "12345678901234567890"])
async def test_a_stored_watcher_with_a_bad_port_fails_each_scheduled_check_until_disabled(
    database: MemorySignalDatabase, runner: CheckRunner, serde: AvroSerde, port: str
) -> None:
    """A watcher whose URL skipped validation, as rows written before a rule existed can."""
    spec = dataclasses.replace(make_spec(url("/")), url=f"https://site.example.com:{port}/")
    record = await insert(database, "user-1", spec)
    scheduler = Scheduler(runner, "instance-a")
    for round_number in range(1, AUTO_DISABLE_FAILURES + 1):
        make_due(database, record.id)
        assert await scheduler.scan() == 1
        await scheduler.drain(30)
        current = await stored(database, "user-1", record.id)
        assert [c.error_code for c in await checks_of(database, record.id)] == ["url_refused"] * round_number
        assert current.consecutive_failures == round_number
    assert scheduler.checks_done == AUTO_DISABLE_FAILURES
    assert current.status is Status.DISABLED
    assert [(e, p["last_error_code"]) for _, e, p in decoded(database, serde)] == [
        ("WatcherDisabled", "url_refused")
    ]
