"""The drain verdict: may an operator stop this instance now?"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ActiveWork", "DrainVerdict", "drain_verdict"]


@dataclass(frozen=True)
class ActiveWork:
    jobs: int
    uploads: int
    merges: int

    @property
    def idle(self) -> bool:
        return self.jobs == 0 and self.uploads == 0 and self.merges == 0


@dataclass(frozen=True)
class DrainVerdict:
    safe_to_stop: bool
    reason: str  # stable code: safe | not_draining | capability_unknown | capability_mismatch | ...


def drain_verdict(
    own_instance_id: str, capability_instance_id: str | None, draining: bool, work: ActiveWork | None
) -> DrainVerdict:
    """Safe only when draining, the published capability names this very instance and the active work is
    known and zero. Anything unknown means "not drained"."""
    if capability_instance_id is None:
        return DrainVerdict(False, "capability_unknown")
    if capability_instance_id != own_instance_id:
        return DrainVerdict(False, "capability_mismatch")
    if not draining:
        return DrainVerdict(False, "not_draining")
    if work is None:
        return DrainVerdict(False, "work_unknown")
    if not work.idle:
        return DrainVerdict(False, "work_active")
    return DrainVerdict(True, "safe")
