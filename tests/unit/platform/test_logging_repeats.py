"""Repeated identical warnings are written once per window, with the count of the ones held back."""

from __future__ import annotations

import io
import json
import logging

from yovision_platform.observability import RepeatFilter, configure_logging


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def record(message: str, level: int = logging.WARNING, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("aiokafka.client", level, "x", 1, message, ("1", "refused"), None)
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def test_a_burst_of_identical_warnings_is_one_line_then_one_line_with_the_count() -> None:
    clock = Clock()
    repeats = RepeatFilter(60.0, clock=clock)
    written = [repeats.filter(record("Unable connect to node with id %s: %s")) for _ in range(4_550)]
    assert written.count(True) == 1
    clock.now += 60.0
    summary = record("Unable connect to node with id %s: %s")
    assert repeats.filter(summary) is True
    assert summary.repeated == 4_549  # type: ignore[attr-defined]


def test_other_messages_levels_and_extras_are_not_merged() -> None:
    repeats = RepeatFilter(60.0, clock=Clock())
    assert repeats.filter(record("a %s %s"))
    assert repeats.filter(record("b %s %s"))
    assert repeats.filter(record("a %s %s", worker="relay"))
    assert repeats.filter(record("a %s %s", worker="consumer"))
    assert all(repeats.filter(record("a %s %s", logging.INFO)) for _ in range(3))  # info is never held
    assert not repeats.filter(record("a %s %s"))


def test_the_installed_handler_bounds_the_output_of_a_retry_storm() -> None:
    stream = io.StringIO()
    handler = configure_logging("svc", "i-1", "INFO", stream=stream)
    try:
        noisy = logging.getLogger("aiokafka")
        for _ in range(1_000):
            noisy.error("Unable connect to node with id %s: %s", 1, "[Errno 111] Connect call failed")
    finally:
        logging.getLogger().removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 1 and lines[0]["level"] == "ERROR"
