"""The apply safety gate. Integer arithmetic only; any failed condition blocks the whole batch.

Conditions (SPEC section 3), checked in this order, the first failure is the reason:
    report_expired        report age > 15 min (age in whole milliseconds, DB clock)
    no_paths              current total of configured paths == 0
    not_subset            a current candidate is not in the report's candidates
    no_candidates         current candidates < 1
    too_many_candidates   current candidates > 128
    ratio_exceeded        current candidates * 100 > current total * 10
"""

from __future__ import annotations

import enum
from collections.abc import Set
from dataclasses import dataclass

from orphan_scanner.domain import limits


class BlockReason(enum.StrEnum):
    """Every reason an apply deletes nothing. Gate reasons first, then the ones found before the gate."""

    REPORT_EXPIRED = "report_expired"
    NO_PATHS = "no_paths"
    NOT_SUBSET = "not_subset"
    NO_CANDIDATES = "no_candidates"
    TOO_MANY_CANDIDATES = "too_many_candidates"
    RATIO_EXCEEDED = "ratio_exceeded"
    CONFIRMATION_MISMATCH = "confirmation_mismatch"
    PROJECTION_LAGGING = "projection_lagging"
    PROJECTION_UNAVAILABLE = "projection_unavailable"
    ENUMERATION_FAILED = "enumeration_failed"


@dataclass(frozen=True)
class GateInput:
    report_candidates: Set[str]
    current_candidates: Set[str]
    current_total: int
    report_age_ms: int


def report_expired(report_age_ms: int) -> bool:
    return report_age_ms > limits.REPORT_VALIDITY_MS


def ratio_allows(candidates: int, current_total: int) -> bool:
    return candidates * limits.DELETE_RATIO_DENOMINATOR <= current_total * limits.DELETE_RATIO_NUMERATOR


def check_gate(gate: GateInput) -> BlockReason | None:
    """None when the batch may proceed, else the first failed condition."""
    candidates = len(gate.current_candidates)
    if report_expired(gate.report_age_ms):
        return BlockReason.REPORT_EXPIRED
    if gate.current_total <= 0:
        return BlockReason.NO_PATHS
    if not gate.current_candidates <= gate.report_candidates:
        return BlockReason.NOT_SUBSET
    if candidates < limits.APPLY_MIN_CANDIDATES:
        return BlockReason.NO_CANDIDATES
    if candidates > limits.APPLY_MAX_CANDIDATES:
        return BlockReason.TOO_MANY_CANDIDATES
    if not ratio_allows(candidates, gate.current_total):
        return BlockReason.RATIO_EXCEEDED
    return None
