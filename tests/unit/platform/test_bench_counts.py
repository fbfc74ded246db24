"""A benchmark's ledger of counts: a wrong count (short, or a duplicate) is named, marked instead of
printed as a figure, and ends the benchmark with a non-zero exit."""

from __future__ import annotations

import pytest

from yovision_platform.tools.bench_runner import BenchCounts


def test_counts_that_hold_let_the_benchmark_end_normally() -> None:
    counts = BenchCounts()
    assert counts.expect("relay x1: records on the topic", 50_000, 50_000)
    counts.exit_if_short("bench")
    assert counts.short == []


def test_a_short_count_is_named_and_the_benchmark_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    counts = BenchCounts()
    assert not counts.expect("relay x1 (confluent): records on the topic", 0, 50_000)
    assert counts.expect("relay x1 (aiokafka): records on the topic", 50_000, 50_000)
    assert BenchCounts.mark(False, "37,258/s") == "WRONG COUNT"
    assert BenchCounts.mark(True, "37,258/s") == "37,258/s"
    with pytest.raises(SystemExit) as exited:
        counts.exit_if_short("bench")
    assert exited.value.code == 1
    assert (
        capsys.readouterr().err
        == "bench: WRONG COUNT: relay x1 (confluent): records on the topic: 0 of 50,000\n"
    )


def test_more_than_expected_is_wrong_too() -> None:
    counts = BenchCounts()
    assert not counts.expect("records on the topic (a duplicate)", 50_001, 50_000)
