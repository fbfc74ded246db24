"""The apply safety gate. Integer arithmetic only; any failed condition blocks the whole batch.

Conditions (SPEC section 3), checked in this order, the first failure is the reason:
    report_expired        report age > 15 min (age in whole milliseconds, DB clock)
    no_paths              current total of configured paths == 0
    not_subset            a current candidate is not in the report's candidates
    no_candidates         current candidates < 1
    too_many_candidates   current candidates > 128
    ratio_exceeded        current candidates * 100 > current total * 10

With several MediaMTX servers (`check_fleet_gate`) the batch is every candidate of the apply: first the
conditions above over the whole batch (expiry, subset, 1..128 candidates), then each server that holds a
candidate is checked on its own (its candidates against its own configured total), so one large server
can never cover a sweep of a small one. Any server failing blocks the whole batch, and names the server.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Mapping, Set
from dataclasses import dataclass

from orphan_scanner.domain import limits
from orphan_scanner.domain.classify import ServerPath


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
    """Candidates are path names on one server, or (server, path) pairs: anything hashable."""

    report_candidates: Set[Hashable]
    current_candidates: Set[Hashable]
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


@dataclass(frozen=True)
class FleetGateInput:
    report_candidates: Set[ServerPath]
    current_candidates: Set[ServerPath]
    # configured paths per server now (servers holding a current candidate must be present)
    current_totals: Mapping[str, int]
    report_age_ms: int


@dataclass(frozen=True)
class GateBlock:
    reason: BlockReason
    media_server_id: str | None = None


def check_fleet_gate(gate: FleetGateInput) -> GateBlock | None:
    """None when the batch may proceed, else the first failed condition (and the server it failed on)."""
    overall = check_gate(
        GateInput(
            report_candidates=gate.report_candidates,
            current_candidates=gate.current_candidates,
            current_total=sum(gate.current_totals.values()),
            report_age_ms=gate.report_age_ms,
        )
    )
    if overall is not None and overall is not BlockReason.RATIO_EXCEEDED:
        return GateBlock(overall)
    for server in sorted({path.media_server_id for path in gate.current_candidates}):
        on_server = {path for path in gate.current_candidates if path.media_server_id == server}
        reason = check_gate(
            GateInput(
                report_candidates=gate.report_candidates,
                current_candidates=on_server,
                current_total=gate.current_totals.get(server, 0),
                report_age_ms=gate.report_age_ms,
            )
        )
        if reason is not None:
            return GateBlock(reason, server)
    return None
