"""Classification of every configured MediaMTX path (SPEC section 3).

- `in_use`: a current enabled device claims the path name;
- `owned_stale`: Sense's ownership history has the path and no current enabled device claims it (a disabled
  device declares no path: Sense itself removes the path of a disabled device);
- `unowned`: Sense never recorded owning it. Reported only, never deleted.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass


class PathClass(enum.StrEnum):
    IN_USE = "in_use"
    OWNED_STALE = "owned_stale"
    UNOWNED = "unowned"


@dataclass(frozen=True)
class Classification:
    in_use: frozenset[str]
    # owned_stale path -> the device that most recently owned it (from the ownership history)
    owned_stale: Mapping[str, uuid.UUID]
    unowned: frozenset[str]

    @property
    def observed_total(self) -> int:
        return len(self.in_use) + len(self.owned_stale) + len(self.unowned)

    def class_of(self, name: str) -> PathClass | None:
        if name in self.in_use:
            return PathClass.IN_USE
        if name in self.owned_stale:
            return PathClass.OWNED_STALE
        if name in self.unowned:
            return PathClass.UNOWNED
        return None

    def counts(self) -> dict[PathClass, int]:
        return {
            PathClass.IN_USE: len(self.in_use),
            PathClass.OWNED_STALE: len(self.owned_stale),
            PathClass.UNOWNED: len(self.unowned),
        }


def classify(
    observed: Iterable[str], claimed: Set[str], last_owner: Mapping[str, uuid.UUID]
) -> Classification:
    """`observed`: configured path names; `claimed`: names an enabled device declares now; `last_owner`:
    for each path with ownership history, its most recent owning device."""
    in_use: set[str] = set()
    stale: dict[str, uuid.UUID] = {}
    unowned: set[str] = set()
    for name in set(observed):
        if name in claimed:
            in_use.add(name)
        elif name in last_owner:
            stale[name] = last_owner[name]
        else:
            unowned.add(name)
    return Classification(frozenset(in_use), dict(sorted(stale.items())), frozenset(unowned))
