from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from media_worker.domain.drain import ActiveWork, drain_verdict
from media_worker.domain.material import MaterialStatus, can_transition, protection_until, source_exposable

S = MaterialStatus
CREATED = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("current", "target", "allowed"),
    [
        (S.PENDING, S.PROCESSING, True),
        (S.PENDING, S.DONE, False),
        (S.PENDING, S.FAILED, False),
        (S.PROCESSING, S.DONE, True),
        (S.PROCESSING, S.FAILED, True),
        (S.PROCESSING, S.PENDING, True),
        (S.FAILED, S.PENDING, True),
        (S.FAILED, S.DONE, False),
        (S.DONE, S.PENDING, False),
        (S.DONE, S.FAILED, False),
    ],
)
def test_material_transitions(current: MaterialStatus, target: MaterialStatus, allowed: bool) -> None:
    assert can_transition(current, target) is allowed


def test_protection_window_is_15_days_from_creation() -> None:
    until = protection_until(CREATED)
    assert until == CREATED + timedelta(days=15)
    assert not source_exposable(CREATED, until - timedelta(microseconds=1))
    assert source_exposable(CREATED, until)


IDLE = ActiveWork(0, 0, 0)


def test_safe_to_stop_only_when_draining_idle_and_capability_is_own() -> None:
    assert drain_verdict("a", "a", True, IDLE).safe_to_stop


@pytest.mark.parametrize(
    ("capability", "draining", "work", "reason"),
    [
        (None, True, IDLE, "capability_unknown"),
        ("b", True, IDLE, "capability_mismatch"),
        ("a", False, IDLE, "not_draining"),
        ("a", True, None, "work_unknown"),
        ("a", True, ActiveWork(1, 0, 0), "work_active"),
        ("a", True, ActiveWork(0, 1, 0), "work_active"),
        ("a", True, ActiveWork(0, 0, 1), "work_active"),
    ],
)
def test_anything_unknown_or_active_is_not_drained(
    capability: str | None, draining: bool, work: ActiveWork | None, reason: str
) -> None:
    verdict = drain_verdict("a", capability, draining, work)
    assert not verdict.safe_to_stop
    assert verdict.reason == reason
