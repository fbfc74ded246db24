"""Classification of every configured MediaMTX path, per (server, path) (SPEC section 3, several servers).

- `in_use`: a current enabled device claims the path on that server (a claim without a server, from before
  several servers, claims the name on every server);
- `owned_stale`: Sense's ownership history has the path on that server and no current enabled device claims
  it there (a disabled device declares no path: Sense itself removes the path of a disabled device);
- `unowned`: Sense never recorded owning it on that server. Reported only, never deleted.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from typing import NamedTuple


class ServerPath(NamedTuple):
    media_server_id: str
    path_name: str


class PathClass(enum.StrEnum):
    IN_USE = "in_use"
    OWNED_STALE = "owned_stale"
    UNOWNED = "unowned"


@dataclass(frozen=True)
class Classification:
    in_use: frozenset[ServerPath]
    # owned_stale (server, path) -> the device that most recently owned it there (ownership history)
    owned_stale: Mapping[ServerPath, uuid.UUID]
    unowned: frozenset[ServerPath]

    @property
    def observed_total(self) -> int:
        return len(self.in_use) + len(self.owned_stale) + len(self.unowned)

    def class_of(self, path: ServerPath) -> PathClass | None:
        if path in self.in_use:
            return PathClass.IN_USE
        if path in self.owned_stale:
            return PathClass.OWNED_STALE
        if path in self.unowned:
            return PathClass.UNOWNED
        return None

    def counts(self) -> dict[PathClass, int]:
        return {
            PathClass.IN_USE: len(self.in_use),
            PathClass.OWNED_STALE: len(self.owned_stale),
            PathClass.UNOWNED: len(self.unowned),
        }

    def counts_by_server(self, servers: Iterable[str] = ()) -> dict[str, dict[PathClass, int]]:
        """Per server (every one of `servers`, and any with a path), the count of each class."""
        tallies: dict[str, Counter[PathClass]] = {server: Counter() for server in servers}
        for cls, paths in (
            (PathClass.IN_USE, self.in_use),
            (PathClass.OWNED_STALE, self.owned_stale),
            (PathClass.UNOWNED, self.unowned),
        ):
            for path in paths:
                tallies.setdefault(path.media_server_id, Counter())[cls] += 1
        return {server: {cls: tally[cls] for cls in PathClass} for server, tally in sorted(tallies.items())}

    def totals_by_server(self) -> dict[str, int]:
        return {server: sum(counts.values()) for server, counts in self.counts_by_server().items()}


def classify(
    observed: Iterable[ServerPath], claimed: Set[ServerPath], last_owner: Mapping[ServerPath, uuid.UUID]
) -> Classification:
    """`observed`: configured (server, path) pairs; `claimed`: those an enabled device declares now;
    `last_owner`: for each pair with ownership history, its most recent owning device."""
    in_use: set[ServerPath] = set()
    stale: dict[ServerPath, uuid.UUID] = {}
    unowned: set[ServerPath] = set()
    for path in set(observed):
        if path in claimed:
            in_use.add(path)
        elif path in last_owner:
            stale[path] = last_owner[path]
        else:
            unowned.add(path)
    return Classification(frozenset(in_use), dict(sorted(stale.items())), frozenset(unowned))
