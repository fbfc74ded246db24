"""The report `make test` ends with: each tier's wall time (first test started to last test finished, over
every xdist worker), its test count and summed test time, and the slowest tests.

A pytest plugin (registered by tests/conftest.py). It reads the reports the controller receives, so it
works alike with and without `-n`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pytest
from _pytest.terminal import TerminalReporter

SLOWEST = 30


@dataclass
class _Tier:
    started: float = float("inf")
    finished: float = 0.0
    tests: set[str] = field(default_factory=set)
    seconds: float = 0.0

    def add(self, report: pytest.TestReport) -> None:
        self.started = min(self.started, report.start)
        self.finished = max(self.finished, report.stop)
        self.tests.add(report.nodeid)
        self.seconds += report.duration


_tiers: dict[str, _Tier] = defaultdict(_Tier)
_per_test: dict[str, float] = defaultdict(float)


def tier_of(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _tiers[tier_of(report.nodeid)].add(report)
    _per_test[report.nodeid] += report.duration


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    if not _tiers:
        return
    write = terminalreporter.write_line
    terminalreporter.section("suite report: wall time per tier")
    first = min(t.started for t in _tiers.values())
    last = max(t.finished for t in _tiers.values())
    write(f"{'tier':<12} {'wall':>8} {'from':>7} {'to':>7} {'tests':>6} {'test time':>10}")
    for name, tier in sorted(_tiers.items(), key=lambda item: item[1].started):
        write(
            f"{name:<12} {tier.finished - tier.started:>7.0f}s {tier.started - first:>6.0f}s "
            f"{tier.finished - first:>6.0f}s {len(tier.tests):>6} {tier.seconds:>9.0f}s"
        )
    write(f"{'all':<12} {last - first:>7.0f}s")
    terminalreporter.section(f"suite report: the {SLOWEST} slowest tests (setup + call + teardown)")
    for nodeid, seconds in sorted(_per_test.items(), key=lambda item: -item[1])[:SLOWEST]:
        write(f"{seconds:>7.1f}s  {nodeid}")
