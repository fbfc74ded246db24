"""Reconcile decisions: what to do with MediaMTX for one device, and when to retry after a failure; and the
items the reconciler works on (claimed under a fenced lease, then loaded)."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime

from sense_reconciler.domain import limits
from sense_reconciler.domain.records import StoredSource
from yovision_platform.storage import Lease

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


# MediaMTX answers that refuse the device's configuration: the same configuration can never succeed, so the
# device waits for a change (failed, no next attempt). Not refusals: 401 and 403 (Sense's own credentials,
# which the operator fixes once for every device), 404 (a path gone meanwhile: the next attempt reads
# again), 408, 409, 425 and 429 (MediaMTX busy or racing another writer).
RETRIED_CLIENT_ERRORS = frozenset({401, 403, 404, 408, 409, 425, 429})


def is_refusal(http_status: int | None) -> bool:
    """Whether a MediaMTX answer with `http_status` refuses the configuration for good."""
    return http_status is not None and 400 <= http_status < 500 and http_status not in RETRIED_CLIENT_ERRORS


@dataclass(frozen=True)
class Convergence:
    """A server's devices whose desired generation is not observed yet, and those of them refused."""

    unconverged: int
    refused: int


def retry_backoff_seconds(attempts: int) -> float:
    """Delay before the next attempt after `attempts` consecutive failures (>= 1): 1 s doubling, capped."""
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    exponent = min(attempts - 1, 32)
    return float(min(limits.RETRY_BACKOFF_CAP_SECONDS, limits.RETRY_BACKOFF_BASE_SECONDS * 2**exponent))


@dataclass(frozen=True)
class ClaimedItem:
    """A due device claimed under a lease (owner + random token + database-clock expiry)."""

    device_id: uuid.UUID
    partition: int
    attempts: int
    media_server_id: str
    lease: Lease


@dataclass(frozen=True)
class WorkItem:
    """What one reconcile needs, read under a freshly renewed lease. `source` is a secret.

    `placements`: every server the path may be configured on (for an enabled device, its own server is
    among them: the renewal recorded it); `placed_now`: that record was made by this renewal, i.e. Sense
    never configured the path on its server before; `replace_due`: the device's source URI changed
    since the last completion (MediaMTX's configuration of the path differs: no need to read it first);
    `trace_parent`: the W3C context of the change that made the device due, which the reconcile continues."""

    device_id: uuid.UUID
    tenant_id: str
    site_id: str
    path_name: str
    desired_state: str
    media_server_id: str
    source: StoredSource
    generation: int
    lease: Lease
    placements: frozenset[str]
    placed_now: bool
    replace_due: bool
    trace_parent: str | None = None

    def __repr__(self) -> str:
        return f"WorkItem(device_id={self.device_id}, generation={self.generation}, source=<redacted>)"


@dataclass(frozen=True)
class Ownership:
    """When Sense first and last saw a device's path configured on a server (`media_path_ownership`)."""

    first_seen_at: datetime
    last_seen_at: datetime
