"""Capped exponential backoff never overflows; the stop-or-timeout wait returns on whichever comes first."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from tests.unit.platform.supervision import supervise_failing
from yovision_platform.backoff import MAX_BACKOFF_EXPONENT, backoff_seconds, wait_for_stop


@pytest.mark.parametrize(
    ("failures", "expected"),
    [(-5, 0.5), (0, 0.5), (1, 1.0), (5, 16.0), (6, 30.0), (1_023, 30.0), (1_024, 30.0), (1_025, 30.0)],
)
def test_backoff_doubles_from_the_base_up_to_the_cap(failures: int, expected: float) -> None:
    assert backoff_seconds(failures, base_seconds=0.5, cap_seconds=30.0) == expected


@pytest.mark.parametrize("failures", [1_024, 10**6, 10**30])
def test_a_huge_failure_count_waits_the_cap_instead_of_raising(failures: int) -> None:
    with pytest.raises(OverflowError):
        _ = 2.0**failures  # what the loops computed before
    assert backoff_seconds(failures, base_seconds=1.0, cap_seconds=30.0) == 30.0
    assert backoff_seconds(failures, base_seconds=1e-9, cap_seconds=1e9) == 1e9


def test_the_exponent_clamp_still_reaches_any_cap_from_a_tiny_base() -> None:
    assert backoff_seconds(MAX_BACKOFF_EXPONENT, base_seconds=1e-200, cap_seconds=3600.0) == 3600.0
    assert backoff_seconds(MAX_BACKOFF_EXPONENT, base_seconds=1e10, cap_seconds=3600.0) == 3600.0


@pytest.mark.parametrize(
    ("base", "cap"), [(-1.0, 1.0), (1.0, -1.0), (float("inf"), 1.0), (1.0, float("nan"))]
)
def test_a_bad_base_or_cap_is_refused(base: float, cap: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        backoff_seconds(1, base_seconds=base, cap_seconds=cap)


async def test_wait_for_stop_times_out_without_a_stop() -> None:
    stop = asyncio.Event()
    assert await wait_for_stop(stop, 0.01) is False
    assert await wait_for_stop(stop, -1.0) is False


async def test_wait_for_stop_returns_as_soon_as_stop_is_set() -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.01, stop.set)
    started = time.monotonic()
    assert await wait_for_stop(stop, 60.0) is True
    assert time.monotonic() - started < 30.0
    assert await wait_for_stop(stop, 60.0) is True  # already set: no wait at all


async def test_the_supervisor_keeps_restarting_a_worker_past_1024_failures(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL, logger="yovision_platform.service")
    assert await supervise_failing(monkeypatch, RuntimeError("boom"), 1_100) == 1_101
