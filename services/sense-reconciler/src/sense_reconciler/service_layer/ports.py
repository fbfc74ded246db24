"""The ports the use cases take (typing.Protocol): the stores and the unit of work over them, the MediaMTX
servers, and the audit push's cursor store and Bell. Each has its PostgreSQL/HTTP adapter in `adapters/`
and its fake in `adapters/memory.py`, proven equal by the contract suites in tests/ports/sense_reconciler.

Every store method runs inside the unit of work's one transaction; a refusal (`PathNameTaken`,
`LeaseLost`, `CursorFenced`) leaves the transaction usable, and the use case decides whether to go on.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sense_reconciler.domain.audit_facts import OutboxFact
from sense_reconciler.domain.audit_push_outcome import BatchFailure, ItemResults
from sense_reconciler.domain.reconcile import ClaimedItem, Convergence, Ownership, PathConfig, WorkItem
from sense_reconciler.domain.records import (
    AuditFact,
    DeviceRow,
    DeviceUpdate,
    NewDevice,
    ReconcileState,
    SiteRow,
    StoredSource,
)
from yovision_platform.messaging import ShardLease, WindowPosition
from yovision_platform.storage import Lease, UnitOfWork

__all__ = [
    "AuditFactReader",
    "AuditPushStore",
    "BellPort",
    "DeviceStore",
    "FactBatch",
    "MediaMtxPort",
    "MediaServerFleet",
    "ReconcileStore",
    "SenseUnitOfWork",
    "SiteStore",
    "UnitOfWorkFactory",
]


class DeviceStore(Protocol):
    """Devices (with their reconcile due rows and device-audit facts)."""

    async def add(self, device: NewDevice) -> DeviceRow:
        """Insert the device (config version 1); `PathNameTaken` when another device has its path name."""
        ...

    async def get(self, device_id: uuid.UUID, *, for_update: bool = False) -> DeviceRow | None: ...

    async def of_site(self, tenant_id: str, site_id: str) -> list[DeviceRow]:
        """Every device of the site, locked, in id order."""
        ...

    async def list_page(
        self, *, tenant_id: str | None, site_id: str | None, after: uuid.UUID | None, limit: int
    ) -> list[DeviceRow]:
        """At most `limit` devices with an id greater than `after` (all when None), in id order."""
        ...

    async def count_enabled(self, tenant_id: str, site_id: str) -> int: ...

    async def update(self, device_id: uuid.UUID, change: DeviceUpdate) -> DeviceRow:
        """A new config version (`DeviceUpdate`)."""
        ...

    async def stored_source(self, device_id: uuid.UUID) -> StoredSource: ...

    async def insert_due_row(self, device_id: uuid.UUID, partition: int, media_server_id: str) -> None:
        """Generation 1, due now, on the device's server."""
        ...

    async def mark_due(
        self, device_id: uuid.UUID, media_server_id: str, *, replace_due: bool = False
    ) -> None:
        """A new desired generation on `media_server_id`: due now, attempts reset (a running lease stays).
        `replace_due`: the source URI changed (kept until a completion observes the newest generation)."""
        ...

    async def reconcile_state(self, device_id: uuid.UUID) -> ReconcileState | None: ...

    async def reconcile_states(self, device_ids: Sequence[uuid.UUID]) -> list[ReconcileState]:
        """The state of each known device of `device_ids`, in device id order."""
        ...

    async def insert_fact(self, fact: AuditFact) -> datetime:
        """Record the fact for the audit push; returns its `occurred_at` (the store's clock, whole ms)."""
        ...


class SiteStore(Protocol):
    """Sites: their limit of enabled video devices and their MediaMTX server."""

    async def lock(self, tenant_id: str, site_id: str, *, new_site_server: str) -> SiteRow:
        """The site, locked; created with the default limit on `new_site_server` when it is new."""
        ...

    async def get(self, tenant_id: str, site_id: str) -> SiteRow | None: ...

    async def set_limit(self, tenant_id: str, site_id: str, max_video_channels: int) -> None: ...

    async def set_server(self, tenant_id: str, site_id: str, media_server_id: str) -> None: ...


class ReconcileStore(Protocol):
    """Fenced access to the due rows: every write after `claim` matches owner, token and an unexpired lease
    (by the store's clock) or raises `LeaseLost` and writes nothing."""

    async def claim(
        self, owner: str, partitions: Sequence[int], *, media_server: str, lease_seconds: float, limit: int
    ) -> list[ClaimedItem]:
        """Due rows of `partitions` on `media_server` that nobody holds, oldest due first (then device id);
        `limit` within 1..CLAIM_BATCH_MAX_ITEMS (ValueError otherwise)."""
        ...

    async def claim_unregistered(
        self,
        owner: str,
        partitions: Sequence[int],
        *,
        registered: Sequence[str],
        lease_seconds: float,
        limit: int,
    ) -> list[ClaimedItem]:
        """Due rows of `partitions` whose server is none of `registered`."""
        ...

    async def renew_and_load(self, item: ClaimedItem, *, lease_seconds: float) -> WorkItem:
        """Renew the lease, then read the device; an enabled device's placement on its server is recorded
        first (before any add there)."""
        ...

    async def renew(self, item: WorkItem, lease: Lease, *, lease_seconds: float) -> Lease:
        """Renew the lease again (before a call the time since the last renewal leaves no room for)."""
        ...

    async def drop_placement(
        self, item: WorkItem, lease: Lease, media_server: str, *, lease_seconds: float
    ) -> Lease:
        """Forget the placement on `media_server` (after its exact delete), renewing the lease."""
        ...

    async def mark_drift_checks(
        self, partitions: Sequence[int], *, older_than_seconds: float, limit: int
    ) -> int:
        """Make converged, unleased devices whose last result is older than `older_than_seconds` due again
        (a new generation), oldest result first; returns how many."""
        ...

    async def complete(self, item: WorkItem, lease: Lease) -> None:
        """`item.generation` observed: converged, unless a newer generation arrived meanwhile (pending)."""
        ...

    async def fail(
        self, item: ClaimedItem, lease: Lease, *, error_code: str, retry_in_seconds: float
    ) -> None:
        """Failed: `attempts + 1`, the code kept (the reason cleared), due again in `retry_in_seconds`."""
        ...

    async def refuse(self, item: WorkItem, lease: Lease, *, error_code: str, reason: str | None) -> None:
        """Failed for good (MediaMTX refused the configuration): `attempts + 1`, code and reason kept, not
        due again until a change (no `next_attempt_at`); a change made since `item` was loaded: due now."""
        ...

    async def release(self, item: ClaimedItem) -> None:
        """Give the row back untouched (claimable again at once)."""
        ...

    async def record_ownership(self, item: WorkItem) -> Ownership:
        """The device's path is configured on its server: first seen now, or seen again."""
        ...

    async def convergence(self, media_server: str) -> Convergence:
        """How many of `media_server`'s devices are unconverged, and how many of them refused."""
        ...


class SenseUnitOfWork(UnitOfWork, Protocol):
    """One transaction over every store of sense-reconciler and its Kafka outbox."""

    @property
    def devices(self) -> DeviceStore: ...

    @property
    def sites(self) -> SiteStore: ...

    @property
    def reconcile(self) -> ReconcileStore: ...


UnitOfWorkFactory = Callable[[], SenseUnitOfWork]


class MediaMtxPort(Protocol):
    """One MediaMTX server's path configurations (only the fields Sense manages). Failures raise
    `MediaMtxError` with a stable code (`mediamtx_http_400` for an add of a path that exists)."""

    @property
    def deadline_seconds(self) -> float: ...

    async def get_path(self, name: str) -> PathConfig | None: ...

    async def add_path(self, name: str, config: PathConfig) -> None: ...

    async def replace_path(self, name: str, config: PathConfig) -> None: ...

    async def delete_path(self, name: str) -> bool:
        """Delete exactly `name`: True when it existed, False when it was gone already."""
        ...


class MediaServerFleet(Protocol):
    """The registered MediaMTX servers (yovision_platform.mediamtx.MediaFleet)."""

    @property
    def ids(self) -> tuple[str, ...]: ...

    @property
    def deadline_seconds(self) -> float: ...

    def client(self, server_id: str) -> MediaMtxPort:
        """`MediaMtxError(media_server_not_registered)` for an id that is not registered."""
        ...


@dataclass(frozen=True)
class FactBatch:
    """Facts to push, in id order, with the cursor position before and after them."""

    facts: Sequence[OutboxFact]
    before: WindowPosition
    after: WindowPosition


class AuditFactReader(Protocol):
    """Reads the facts after a cursor position batch by batch; remembers what it handed out."""

    async def next_batch(self) -> FactBatch: ...

    def reset(self, position: WindowPosition) -> None:
        """Go back to `position` (the one the cursor still holds, after a failed push)."""
        ...


class AuditPushStore(Protocol):
    """The audit push's one cursor over the device-audit facts, and its dead letters. One holder at a time
    (a lease by the store's clock); every write of a holder whose lease was taken over raises
    `CursorFenced` and writes nothing."""

    async def acquire(self) -> ShardLease | None:
        """The cursor, when it is free or its lease expired (a new epoch); None while another holds it."""
        ...

    def reader(self, lease: ShardLease, batch_size: int) -> AuditFactReader: ...

    async def record_results(
        self, lease: ShardLease, position: WindowPosition, dead_letters: Sequence[tuple[int, str]]
    ) -> None:
        """Move the cursor to `position` and dead-letter the rejected facts (row id, Bell's code) at once;
        the retry state is cleared."""
        ...

    async def fail_batch(
        self, lease: ShardLease, code: str, *, base_seconds: float, cap_seconds: float
    ) -> float:
        """The cursor stays and backs off `min(cap, base * 2**attempts)`; returns the seconds to wait."""
        ...

    async def renew(self, lease: ShardLease) -> bool:
        """Extend the lease; False when it was taken over."""
        ...

    async def release(self, lease: ShardLease) -> None:
        """Give the cursor up; a no-op when it was taken over."""
        ...

    async def retry_in(self) -> float:
        """Seconds until the cursor's next attempt is due (0 when due)."""
        ...

    async def pending(self) -> int:
        """Recorded facts the cursor has not passed yet."""
        ...


class BellPort(Protocol):
    """Bell's batch endpoint: every item's result, or a whole-batch failure; never raises for network or
    protocol trouble."""

    async def send(self, facts: Sequence[OutboxFact]) -> ItemResults | BatchFailure: ...
