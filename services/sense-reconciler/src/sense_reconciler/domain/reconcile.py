"""Reconcile decisions: what to do with MediaMTX for one device, and when to retry after a failure."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sense_reconciler.domain import limits

# Every path Sense configures pulls its source only while someone reads it.
SOURCE_ON_DEMAND = True


@dataclass(frozen=True)
class PathConfig:
    """The part of a MediaMTX path configuration Sense manages. `source` is a secret: never log it."""

    source: str
    source_on_demand: bool = SOURCE_ON_DEMAND

    def __repr__(self) -> str:
        return f"PathConfig(source=<redacted>, source_on_demand={self.source_on_demand})"

    def to_mediamtx(self) -> dict[str, object]:
        return {"source": self.source, "sourceOnDemand": self.source_on_demand}


class PathAction(enum.StrEnum):
    ADD = "add"
    REPLACE = "replace"
    NONE = "none"
    DELETE = "delete"


def plan_ensure(desired: PathConfig, observed: PathConfig | None) -> PathAction:
    """Enabled device: create a missing path, replace one whose managed config differs, else nothing."""
    if observed is None:
        return PathAction.ADD
    if observed != desired:
        return PathAction.REPLACE
    return PathAction.NONE


def retry_backoff_seconds(attempts: int) -> float:
    """Delay before the next attempt after `attempts` consecutive failures (>= 1): 1 s doubling, capped."""
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    exponent = min(attempts - 1, 32)
    return float(min(limits.RETRY_BACKOFF_CAP_SECONDS, limits.RETRY_BACKOFF_BASE_SECONDS * 2**exponent))
