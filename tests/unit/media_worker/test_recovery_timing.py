from __future__ import annotations

import pytest

from media_worker.service_layer.transcoder import (
    LEASE_EXPIRY_SLACK_SECONDS,
    MIN_ROUND_GAP_SECONDS,
    RESCAN_SECONDS,
    WorkerTiming,
)


@pytest.mark.parametrize(
    ("expiry_in", "next_round"),
    [
        (None, RESCAN_SECONDS),  # no lease known: the plain rescan
        (5.0, 5.0 + LEASE_EXPIRY_SLACK_SECONDS),  # just after the earliest expiry
        (0.0, max(MIN_ROUND_GAP_SECONDS, LEASE_EXPIRY_SLACK_SECONDS)),
        (-3.0, MIN_ROUND_GAP_SECONDS),  # never a busy loop
        (RESCAN_SECONDS - LEASE_EXPIRY_SLACK_SECONDS, RESCAN_SECONDS),  # at the bound
        (RESCAN_SECONDS, RESCAN_SECONDS),  # beyond it: the rescan comes first
        (10 * RESCAN_SECONDS, RESCAN_SECONDS),
    ],
)
def test_the_next_round_follows_the_earliest_lease_expiry_within_bounds(
    expiry_in: float | None, next_round: float
) -> None:
    assert WorkerTiming().next_round_in(expiry_in) == pytest.approx(next_round)


def test_recovery_timing_constants() -> None:
    assert (RESCAN_SECONDS, LEASE_EXPIRY_SLACK_SECONDS, MIN_ROUND_GAP_SECONDS) == (60.0, 0.2, 0.1)
