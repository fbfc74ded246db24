"""The doctor calls a consumer loop stalled only past CONSUMER_STALL_SECONDS since its last round."""

from __future__ import annotations

import pytest

from yovision_platform.tools.doctor import CONSUMER_STALL_SECONDS, stalled_seconds

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("age", "expected"),
    [
        (0.0, None),
        (CONSUMER_STALL_SECONDS - 0.5, None),
        (CONSUMER_STALL_SECONDS, None),
        (CONSUMER_STALL_SECONDS + 0.5, CONSUMER_STALL_SECONDS),
        (CONSUMER_STALL_SECONDS + 90.0, CONSUMER_STALL_SECONDS + 90),
    ],
)
def test_a_loop_is_stalled_only_past_the_limit(age: float, expected: int | None) -> None:
    assert stalled_seconds(NOW - age, NOW) == expected


def test_a_service_without_the_gauge_is_not_stalled() -> None:
    assert stalled_seconds(None, NOW) is None
