"""In-memory fakes of every port of sense-reconciler, for use-case tests that run in milliseconds.

`MemorySense` is the fake database: one state shared by its units of work (`units()`), its audit push
store and its source-URI secret rows, all timed by one clock (the "database clock"). Each fake behaves as
its PostgreSQL adapter does, as far as tests/ports/sense_reconciler proves: ordering, uniqueness, fencing
by lease, limits, not-found. Like the platform's `MemoryUnitOfWork`, the fakes are serial: one
transaction at a time, no row locks, no concurrent isolation (those stay tested on PostgreSQL).

`MemoryMediaMtx` is one MediaMTX server's path configurations and `MemoryBell` Bell's batch endpoint;
both record what they were sent and can be told to fail the next calls.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Self, TypeVar

from sense_reconciler.domain import limits
from sense_reconciler.domain.audit_facts import OutboxFact, fact_document
from sense_reconciler.domain.audit_push_outcome import (
    BatchFailure,
    ItemResults,
    PushFailureCode,
    PushItemOutcome,
)
from sense_reconciler.domain.errors import PathNameTaken
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
from sense_reconciler.service_layer.ports import FactBatch, UnitOfWorkFactory
from sense_reconciler.service_layer.source_uris import source_uri_context
from yovision_platform.audit_push import ItemRejectCode, ItemStatus, RejectedItem, validate_item
from yovision_platform.errors import LeaseLost
from yovision_platform.mediamtx import MediaMtxError
from yovision_platform.messaging import MAX_BACKOFF_EXPONENT, CursorFenced, ShardLease, WindowPosition
from yovision_platform.observability import current_traceparent
from yovision_platform.security import SecretField, SecretRow
from yovision_platform.storage import DbConnection, Lease, MemoryOutbox, MemoryUnitOfWork

__all__ = [
    "Clock",
    "MemoryAuditPushStore",
    "MemoryBell",
    "MemoryMediaMtx",
    "MemorySense",
    "MemorySenseUnitOfWork",
    "MemorySourceUriSecrets",
    "system_clock",
]

Clock = Callable[[], datetime]
R = TypeVar("R")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SOURCE_URI_FIELD = "source_uri"


def system_clock() -> datetime:
    return datetime.now(UTC)


def _clone(row: R) -> R:
    """A shallow copy of a mutable fake row (its fields are immutable values)."""
    new = object.__new__(type(row))
    new.__dict__.update(row.__dict__)
    return new


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=float(value))


@dataclass
class _Device:
    row: DeviceRow
    ciphertext: bytes | None
    plaintext: str | None


@dataclass
class _Due:
    """One `reconcile_state` row."""

    device_id: uuid.UUID
    partition: int
    media_server_id: str
    next_attempt_at: datetime | None  # None: refused, never due until a change
    desired_generation: int = 1
    observed_generation: int = 0
    status: str = "pending"
    attempts: int = 0
    last_error_code: str | None = None
    last_error_reason: str | None = None
    last_result_at: datetime | None = None
    replace_due: bool = False
    lease_owner: str | None = None
    lease_token: uuid.UUID | None = None
    lease_expires_at: datetime | None = None

    def free(self, now: datetime) -> bool:
        return self.lease_expires_at is None or self.lease_expires_at <= now

    def held(self, lease: Lease, now: datetime) -> bool:
        return (
            self.lease_owner == lease.owner
            and self.lease_token == lease.token
            and self.lease_expires_at is not None
            and self.lease_expires_at > now
        )

    def state(self) -> ReconcileState:
        return ReconcileState(**{name: getattr(self, name) for name in ReconcileState.__dataclass_fields__})


@dataclass
class _Cursor:
    """The audit push's `outbox_cursors` row: positions are fact ids (a "snapshot" sees every id up to it)."""

    owner: str | None = None
    epoch: int = 0
    lease_expires_at: datetime | None = None
    prev: int = 0
    cur: int = 0
    last_id: int = 0
    attempts: int = 0
    next_attempt_at: datetime = EPOCH
    last_error_code: str | None = None


@dataclass
class MemorySenseState:
    """Every table of the fake, as plain data (snapshotted and restored by the unit of work)."""

    sites: dict[tuple[str, str], SiteRow] = field(default_factory=dict)
    devices: dict[uuid.UUID, _Device] = field(default_factory=dict)
    due: dict[uuid.UUID, _Due] = field(default_factory=dict)
    placements: dict[tuple[uuid.UUID, str], str] = field(default_factory=dict)
    ownership: dict[tuple[uuid.UUID, str, str], Ownership] = field(default_factory=dict)
    facts: list[OutboxFact] = field(default_factory=list)
    dead_letters: dict[int, str] = field(default_factory=dict)
    cursor: _Cursor = field(default_factory=_Cursor)

    def __deepcopy__(self, memo: dict[int, Any]) -> MemorySenseState:
        """A snapshot: new tables and new mutable rows, the immutable values shared (fast enough to take
        at every unit of work)."""
        return MemorySenseState(
            sites=dict(self.sites),
            devices={k: _clone(v) for k, v in self.devices.items()},
            due={k: _clone(v) for k, v in self.due.items()},
            placements=dict(self.placements),
            ownership=dict(self.ownership),
            facts=list(self.facts),
            dead_letters=dict(self.dead_letters),
            cursor=_clone(self.cursor),
        )


class _Database:
    """Holds the current state; a rolled-back unit of work puts its snapshot back here."""

    def __init__(self) -> None:
        self.state = MemorySenseState()


class _OnDatabase:
    """A fake store: it reads the database's current state at every call."""

    def __init__(self, db: _Database) -> None:
        self._db = db

    @property
    def _state(self) -> MemorySenseState:
        return self._db.state


class MemorySiteStore(_OnDatabase):
    async def lock(self, tenant_id: str, site_id: str, *, new_site_server: str) -> SiteRow:
        key = (tenant_id, site_id)
        if key not in self._state.sites:
            self._state.sites[key] = SiteRow(
                tenant_id, site_id, limits.SITE_MAX_VIDEO_CHANNELS_DEFAULT, new_site_server
            )
        return self._state.sites[key]

    async def get(self, tenant_id: str, site_id: str) -> SiteRow | None:
        return self._state.sites.get((tenant_id, site_id))

    async def set_limit(self, tenant_id: str, site_id: str, max_video_channels: int) -> None:
        key = (tenant_id, site_id)
        if key in self._state.sites:
            self._state.sites[key] = replace(self._state.sites[key], max_video_channels=max_video_channels)

    async def set_server(self, tenant_id: str, site_id: str, media_server_id: str) -> None:
        key = (tenant_id, site_id)
        if key in self._state.sites:
            self._state.sites[key] = replace(self._state.sites[key], media_server_id=media_server_id)


class MemoryDeviceStore(_OnDatabase):
    def __init__(self, db: _Database, clock: Clock) -> None:
        super().__init__(db)
        self._clock = clock

    async def add(self, device: NewDevice) -> DeviceRow:
        taken = device.id in self._state.devices or any(
            d.row.path_name == device.path_name for d in self._state.devices.values()
        )
        if taken:
            raise PathNameTaken()
        now = self._clock()
        row = DeviceRow(
            id=device.id,
            tenant_id=device.tenant_id,
            site_id=device.site_id,
            name=device.name,
            path_name=device.path_name,
            media_server_id=device.media_server_id,
            desired_state=device.desired_state,
            config_version=1,
            created_at=now,
            updated_at=now,
        )
        self._state.devices[device.id] = _Device(row, device.source_uri_ciphertext, None)
        return row

    async def get(self, device_id: uuid.UUID, *, for_update: bool = False) -> DeviceRow | None:
        device = self._state.devices.get(device_id)
        return None if device is None else device.row

    async def of_site(self, tenant_id: str, site_id: str) -> list[DeviceRow]:
        return [
            d.row
            for _, d in sorted(self._state.devices.items())
            if (d.row.tenant_id, d.row.site_id) == (tenant_id, site_id)
        ]

    async def list_page(
        self, *, tenant_id: str | None, site_id: str | None, after: uuid.UUID | None, limit: int
    ) -> list[DeviceRow]:
        rows = [
            d.row
            for device_id, d in sorted(self._state.devices.items())
            if (tenant_id is None or d.row.tenant_id == tenant_id)
            and (site_id is None or d.row.site_id == site_id)
            and (after is None or device_id > after)
        ]
        return rows[:limit]

    async def count_enabled(self, tenant_id: str, site_id: str) -> int:
        return sum(
            1
            for d in self._state.devices.values()
            if (d.row.tenant_id, d.row.site_id, d.row.desired_state) == (tenant_id, site_id, "enabled")
        )

    async def update(self, device_id: uuid.UUID, change: DeviceUpdate) -> DeviceRow:
        device = self._state.devices[device_id]
        device.row = replace(
            device.row,
            name=change.name,
            desired_state=change.desired_state,
            media_server_id=change.media_server_id or device.row.media_server_id,
            config_version=device.row.config_version + 1,
            updated_at=self._clock(),
        )
        if change.source_uri_ciphertext is not None:
            device.ciphertext, device.plaintext = change.source_uri_ciphertext, None
        return device.row

    async def stored_source(self, device_id: uuid.UUID) -> StoredSource:
        device = self._state.devices[device_id]
        return StoredSource(device.ciphertext, device.plaintext)

    async def insert_due_row(self, device_id: uuid.UUID, partition: int, media_server_id: str) -> None:
        self._state.due[device_id] = _Due(device_id, partition, media_server_id, self._clock())

    async def mark_due(
        self, device_id: uuid.UUID, media_server_id: str, *, replace_due: bool = False
    ) -> None:
        due = self._state.due.get(device_id)
        if due is not None:
            due.desired_generation += 1
            due.status, due.attempts = "pending", 0
            due.next_attempt_at, due.media_server_id = self._clock(), media_server_id
            due.replace_due = due.replace_due or replace_due

    async def reconcile_state(self, device_id: uuid.UUID) -> ReconcileState | None:
        due = self._state.due.get(device_id)
        return None if due is None else due.state()

    async def reconcile_states(self, device_ids: Sequence[uuid.UUID]) -> list[ReconcileState]:
        wanted = set(device_ids)
        return [due.state() for device_id, due in sorted(self._state.due.items()) if device_id in wanted]

    async def insert_fact(self, fact: AuditFact) -> datetime:
        now = self._clock()
        occurred_at = now.replace(microsecond=now.microsecond // 1000 * 1000)
        device = fact.device
        row_id = (self._state.facts[-1].row_id if self._state.facts else 0) + 1
        self._state.facts.append(
            OutboxFact(
                row_id=row_id,
                event_id=fact.event_id,
                fact_version=fact.fact_version,
                action=fact.action,
                actor=fact.actor,
                device_id=device.id,
                tenant_id=device.tenant_id,
                site_id=device.site_id,
                changed_fields=tuple(fact.changed_fields),
                config_version=device.config_version,
                occurred_at=occurred_at,
                trace_parent=current_traceparent(),
            )
        )
        return occurred_at


class MemoryReconcileStore(_OnDatabase):
    def __init__(self, db: _Database, clock: Clock) -> None:
        super().__init__(db)
        self._clock = clock

    async def claim(
        self, owner: str, partitions: Sequence[int], *, media_server: str, lease_seconds: float, limit: int
    ) -> list[ClaimedItem]:
        return self._claim(owner, partitions, lambda server: server == media_server, lease_seconds, limit)

    async def claim_unregistered(
        self,
        owner: str,
        partitions: Sequence[int],
        *,
        registered: Sequence[str],
        lease_seconds: float,
        limit: int,
    ) -> list[ClaimedItem]:
        known = frozenset(registered)
        return self._claim(owner, partitions, lambda server: server not in known, lease_seconds, limit)

    def _claim(
        self,
        owner: str,
        partitions: Sequence[int],
        on_server: Callable[[str], bool],
        lease_seconds: float,
        limit: int,
    ) -> list[ClaimedItem]:
        if not 1 <= limit <= limits.CLAIM_BATCH_MAX_ITEMS:
            raise ValueError(f"claim batch must be within 1..{limits.CLAIM_BATCH_MAX_ITEMS}")
        now = self._clock()
        wanted = set(partitions)
        due = sorted(
            (
                d
                for d in self._state.due.values()
                if d.observed_generation < d.desired_generation
                and d.next_attempt_at is not None
                and d.next_attempt_at <= now
                and d.partition in wanted
                and on_server(d.media_server_id)
                and d.free(now)
            ),
            key=lambda d: (d.next_attempt_at or now, d.device_id),
        )[:limit]
        claimed = []
        for d in due:
            d.lease_owner, d.lease_token, d.lease_expires_at = (
                owner,
                uuid.uuid4(),
                now + _seconds(lease_seconds),
            )
            lease = Lease(owner, d.lease_token, d.lease_expires_at)
            claimed.append(ClaimedItem(d.device_id, d.partition, d.attempts, d.media_server_id, lease))
        return claimed

    def _renew(self, device_id: uuid.UUID, lease: Lease, lease_seconds: float) -> Lease:
        now = self._clock()
        due = self._state.due.get(device_id)
        if due is None or not due.held(lease, now):
            raise LeaseLost()
        due.lease_expires_at = now + _seconds(lease_seconds)
        return Lease(lease.owner, lease.token, due.lease_expires_at)

    def _fenced(self, device_id: uuid.UUID, lease: Lease) -> _Due:
        due = self._state.due.get(device_id)
        if due is None or not due.held(lease, self._clock()):
            raise LeaseLost()
        return due

    async def renew_and_load(self, item: ClaimedItem, *, lease_seconds: float) -> WorkItem:
        lease = self._renew(item.device_id, item.lease, lease_seconds)
        device = self._state.devices[item.device_id]
        row = device.row
        placed_now = False
        if row.desired_state == "enabled" and (row.id, row.media_server_id) not in self._state.placements:
            self._state.placements[(row.id, row.media_server_id)] = row.path_name
            placed_now = True
        return WorkItem(
            device_id=row.id,
            tenant_id=row.tenant_id,
            site_id=row.site_id,
            path_name=row.path_name,
            desired_state=row.desired_state,
            media_server_id=row.media_server_id,
            source=StoredSource(device.ciphertext, device.plaintext),
            generation=self._state.due[row.id].desired_generation,
            lease=lease,
            placements=frozenset(server for d, server in self._state.placements if d == row.id),
            placed_now=placed_now,
            replace_due=self._state.due[row.id].replace_due,
        )

    async def renew(self, item: WorkItem, lease: Lease, *, lease_seconds: float) -> Lease:
        return self._renew(item.device_id, lease, lease_seconds)

    async def drop_placement(
        self, item: WorkItem, lease: Lease, media_server: str, *, lease_seconds: float
    ) -> Lease:
        renewed = self._renew(item.device_id, lease, lease_seconds)
        self._state.placements.pop((item.device_id, media_server), None)
        return renewed

    async def mark_drift_checks(
        self, partitions: Sequence[int], *, older_than_seconds: float, limit: int
    ) -> int:
        now = self._clock()
        wanted = set(partitions)
        older = now - _seconds(older_than_seconds)
        due = sorted(
            (
                d
                for d in self._state.due.values()
                if d.partition in wanted
                and d.status == "converged"
                and d.observed_generation >= d.desired_generation
                and d.last_result_at is not None
                and d.last_result_at < older
                and d.free(now)
            ),
            key=lambda d: d.last_result_at or EPOCH,
        )[:limit]
        for d in due:
            d.desired_generation += 1
            d.next_attempt_at = now
        return len(due)

    @staticmethod
    def _settled(due: _Due, now: datetime) -> None:
        due.last_result_at = now
        due.lease_owner = due.lease_token = due.lease_expires_at = None

    async def complete(self, item: WorkItem, lease: Lease) -> None:
        due = self._fenced(item.device_id, lease)
        now = self._clock()
        due.observed_generation = max(due.observed_generation, item.generation)
        due.status = "converged" if due.desired_generation <= item.generation else "pending"
        due.replace_due = due.replace_due and due.desired_generation > item.generation
        due.attempts, due.last_error_code, due.last_error_reason, due.next_attempt_at = 0, None, None, now
        self._settled(due, now)

    async def fail(
        self, item: ClaimedItem, lease: Lease, *, error_code: str, retry_in_seconds: float
    ) -> None:
        due = self._fenced(item.device_id, lease)
        now = self._clock()
        due.status, due.attempts, due.last_error_code = "failed", due.attempts + 1, error_code
        due.last_error_reason, due.next_attempt_at = None, now + _seconds(retry_in_seconds)
        self._settled(due, now)

    async def refuse(self, item: WorkItem, lease: Lease, *, error_code: str, reason: str | None) -> None:
        due = self._fenced(item.device_id, lease)
        now = self._clock()
        due.status, due.attempts, due.last_error_code = "failed", due.attempts + 1, error_code
        due.last_error_reason = reason
        due.next_attempt_at = None if due.desired_generation <= item.generation else now
        self._settled(due, now)

    async def release(self, item: ClaimedItem) -> None:
        due = self._fenced(item.device_id, item.lease)
        due.lease_owner = due.lease_token = due.lease_expires_at = None

    async def record_ownership(self, item: WorkItem) -> Ownership:
        now = self._clock()
        key = (item.device_id, item.media_server_id, item.path_name)
        seen = self._state.ownership.get(key)
        self._state.ownership[key] = Ownership(seen.first_seen_at if seen else now, now)
        return self._state.ownership[key]

    async def convergence(self, media_server: str) -> Convergence:
        unconverged = [
            d
            for d in self._state.due.values()
            if d.observed_generation < d.desired_generation and d.media_server_id == media_server
        ]
        return Convergence(len(unconverged), sum(1 for d in unconverged if d.next_attempt_at is None))


class MemorySenseUnitOfWork(MemoryUnitOfWork):
    """One transaction over the fake's state; its outbox is the fake's one outbox."""

    def __init__(self, db: _Database, outbox: MemoryOutbox, clock: Clock) -> None:
        super().__init__()
        self.outbox = outbox
        self._db = db
        self._clock = clock
        self._started_at = clock()
        self.devices = MemoryDeviceStore(db, self.now)
        self.sites = MemorySiteStore(db)
        self.reconcile = MemoryReconcileStore(db, self.now)

    def now(self) -> datetime:
        """The transaction's time, as PostgreSQL's now(): when the unit of work began."""
        return self._started_at

    def stores(self) -> Sequence[object]:
        return (self._db,)

    async def __aenter__(self) -> Self:
        self._started_at = self._clock()
        return await super().__aenter__()


class MemoryFactReader(_OnDatabase):
    """The fake's windows: a window sees every fact recorded when it opened (ids up to `cur`)."""

    def __init__(self, db: _Database, position: WindowPosition, batch_size: int) -> None:
        super().__init__(db)
        self._position = position
        self._batch_size = batch_size

    async def next_batch(self) -> FactBatch:
        before = self._position
        prev, cur, last_id = int(before.prev), int(before.cur), before.last_id
        if before.window_done:
            cur = self._state.facts[-1].row_id if self._state.facts else prev
        rows = [f for f in self._state.facts if prev < f.row_id <= cur and f.row_id > last_id]
        if len(rows) > self._batch_size:
            rows = rows[: self._batch_size]
            after = WindowPosition(str(prev), str(cur), rows[-1].row_id)
        else:
            after = WindowPosition(str(cur), str(cur), 0)
        if not rows:
            before = after
        self._position = after
        return FactBatch(rows, before, after)

    def reset(self, position: WindowPosition) -> None:
        self._position = position


class MemoryAuditPushStore(_OnDatabase):
    """The fake audit push store: the cursor and dead letters of a `MemorySense`, fenced like the real one
    on (owner, epoch)."""

    def __init__(self, db: _Database, clock: Clock, owner: str, *, lease_seconds: float) -> None:
        super().__init__(db)
        self._clock = clock
        self._owner = owner
        self._lease_seconds = float(lease_seconds)

    def _fenced(self, lease: ShardLease) -> _Cursor:
        cursor = self._state.cursor
        if cursor.owner != self._owner or cursor.epoch != lease.epoch:
            raise CursorFenced()
        return cursor

    def _wait(self, until: datetime) -> float:
        return max(0.0, (until - self._clock()).total_seconds())

    async def acquire(self) -> ShardLease | None:
        cursor, now = self._state.cursor, self._clock()
        if cursor.owner is not None and cursor.lease_expires_at is not None and cursor.lease_expires_at > now:
            return None
        cursor.owner, cursor.epoch = self._owner, cursor.epoch + 1
        cursor.lease_expires_at = now + _seconds(self._lease_seconds)
        return ShardLease(
            shard=0,
            epoch=cursor.epoch,
            position=WindowPosition(str(cursor.prev), str(cursor.cur), cursor.last_id),
            attempts=cursor.attempts,
            retry_in_seconds=self._wait(cursor.next_attempt_at),
            expires_in_seconds=self._lease_seconds,
        )

    def reader(self, lease: ShardLease, batch_size: int) -> MemoryFactReader:
        return MemoryFactReader(self._db, lease.position, batch_size)

    async def record_results(
        self, lease: ShardLease, position: WindowPosition, dead_letters: Sequence[tuple[int, str]]
    ) -> None:
        cursor, now = self._fenced(lease), self._clock()
        cursor.prev, cursor.cur, cursor.last_id = int(position.prev), int(position.cur), position.last_id
        cursor.lease_expires_at = now + _seconds(self._lease_seconds)
        cursor.attempts, cursor.next_attempt_at, cursor.last_error_code = 0, now, None
        recorded = {f.row_id for f in self._state.facts}
        for row_id, code in dead_letters:
            if row_id in recorded:
                self._state.dead_letters.setdefault(row_id, code)

    async def fail_batch(
        self, lease: ShardLease, code: str, *, base_seconds: float, cap_seconds: float
    ) -> float:
        cursor, now = self._fenced(lease), self._clock()
        delay = float(min(cap_seconds, base_seconds * 2 ** min(cursor.attempts, MAX_BACKOFF_EXPONENT)))
        cursor.attempts, cursor.last_error_code = cursor.attempts + 1, code
        cursor.lease_expires_at = now + _seconds(self._lease_seconds)
        cursor.next_attempt_at = now + _seconds(delay)
        return max(0.0, delay)

    async def renew(self, lease: ShardLease) -> bool:
        try:
            cursor = self._fenced(lease)
        except CursorFenced:
            return False
        cursor.lease_expires_at = self._clock() + _seconds(self._lease_seconds)
        return True

    async def release(self, lease: ShardLease) -> None:
        try:
            cursor = self._fenced(lease)
        except CursorFenced:
            return
        cursor.owner = cursor.lease_expires_at = None

    async def retry_in(self) -> float:
        return self._wait(self._state.cursor.next_attempt_at)

    async def pending(self) -> int:
        cursor = self._state.cursor
        passed = min(cursor.cur, cursor.last_id)
        return sum(1 for f in self._state.facts if f.row_id > cursor.prev and f.row_id > passed)


class MemorySourceUriSecrets(_OnDatabase):
    """The fake of `adapters.source_uri_secrets.SourceUriSecrets` (the platform's `SecretRowStore`); the
    connection argument is ignored."""

    def __init__(self, db: _Database, *, legacy_only: bool = False) -> None:
        super().__init__(db)
        self._legacy_only = legacy_only

    async def page(self, conn: DbConnection | None, *, after: Any | None, limit: int) -> Sequence[SecretRow]:
        rows = []
        for device_id, device in sorted(self._state.devices.items()):
            if after is not None and device_id <= after:
                continue
            if self._legacy_only and device.plaintext is None:
                continue
            plaintext = None if device.plaintext is None else device.plaintext.encode("utf-8")
            field_ = SecretField(source_uri_context(device_id), device.ciphertext, plaintext)
            rows.append(SecretRow(device_id, {SOURCE_URI_FIELD: field_}))
        return rows[:limit]

    async def swap(
        self, conn: DbConnection | None, row: SecretRow, ciphertexts: Mapping[str, bytes | None]
    ) -> bool:
        before = row.fields[SOURCE_URI_FIELD]
        device = self._state.devices.get(row.row_id)
        plaintext = None if before.plaintext is None else before.plaintext.decode("utf-8")
        if device is None or (device.ciphertext, device.plaintext) != (before.stored, plaintext):
            return False
        device.ciphertext, device.plaintext = ciphertexts[SOURCE_URI_FIELD], None
        return True


class MemorySense:
    """The fake database of sense-reconciler (see the module docstring)."""

    def __init__(self, clock: Clock = system_clock) -> None:
        self.clock = clock
        self._db = _Database()
        self.outbox = MemoryOutbox()

    @property
    def state(self) -> MemorySenseState:
        """What is committed now (for tests to look at)."""
        return self._db.state

    def unit(self) -> MemorySenseUnitOfWork:
        return MemorySenseUnitOfWork(self._db, self.outbox, self.clock)

    def units(self) -> UnitOfWorkFactory:
        return self.unit

    def audit_push_store(self, owner: str, *, lease_seconds: float) -> MemoryAuditPushStore:
        return MemoryAuditPushStore(self._db, self.clock, owner, lease_seconds=lease_seconds)

    def source_uri_secrets(self, *, legacy_only: bool = False) -> MemorySourceUriSecrets:
        return MemorySourceUriSecrets(self._db, legacy_only=legacy_only)

    def store_cleartext_source(self, device_id: uuid.UUID, source_uri: str) -> None:
        """A device row as written before encryption (migration 0007): its source URI in cleartext."""
        device = self.state.devices[device_id]
        device.ciphertext, device.plaintext = None, source_uri


def _check_source(config: PathConfig) -> None:
    """MediaMTX's first check of a source: its scheme, matched in lower case only (the reason, as the real
    client redacts it)."""
    if not config.source.startswith(("rtsp://", "rtsps://")):
        raise MediaMtxError("mediamtx_http_400", status=400, reason="invalid source: <redacted>")


class MemoryMediaMtx:
    """One MediaMTX server's path configurations. `calls` journals (action, path name); each code (or
    error) put in `failures` makes one call fail with `MediaMtxError(code)` (or that error) before it does
    anything."""

    def __init__(self, *, deadline_seconds: float = limits.OPERATION_DEADLINE_SECONDS_DEFAULT) -> None:
        self.paths: dict[str, PathConfig] = {}
        self.calls: list[tuple[str, str]] = []
        self.failures: deque[str | MediaMtxError] = deque()
        self._deadline = deadline_seconds

    @property
    def deadline_seconds(self) -> float:
        return self._deadline

    def _call(self, action: str, name: str) -> None:
        self.calls.append((action, name))
        if self.failures:
            failure = self.failures.popleft()
            raise failure if isinstance(failure, MediaMtxError) else MediaMtxError(failure)

    async def get_path(self, name: str) -> PathConfig | None:
        self._call("get", name)
        return self.paths.get(name)

    async def add_path(self, name: str, config: PathConfig) -> None:
        self._call("add", name)
        _check_source(config)
        if name in self.paths:
            raise MediaMtxError("mediamtx_http_400", status=400, reason="path already exists")
        self.paths[name] = config

    async def replace_path(self, name: str, config: PathConfig) -> None:
        self._call("replace", name)
        _check_source(config)
        self.paths[name] = config  # MediaMTX creates a path it does not have

    async def delete_path(self, name: str) -> bool:
        self._call("delete", name)
        return self.paths.pop(name, None) is not None

    async def aclose(self) -> None:
        return None


class MemoryBell:
    """Bell's batch endpoint: a fact is accepted once, `duplicate` when sent again with the same content,
    and rejected (`id_conflict`) with other content under a stored event id; an item Bell's validation
    refuses is rejected with its code. `batches` records the event ids of every batch sent; each code put in
    `failures` fails one whole batch (nothing stored)."""

    def __init__(self) -> None:
        self.stored: dict[uuid.UUID, dict[str, Any]] = {}
        self.batches: list[list[uuid.UUID]] = []
        self.failures: deque[PushFailureCode] = deque()

    async def send(self, facts: Sequence[OutboxFact]) -> ItemResults | BatchFailure:
        self.batches.append([fact.event_id for fact in facts])
        if self.failures:
            return BatchFailure(self.failures.popleft())
        return ItemResults(tuple(self._one(fact) for fact in facts))

    def _one(self, fact: OutboxFact) -> PushItemOutcome:
        checked = validate_item(fact_document(fact))
        if isinstance(checked, RejectedItem):
            return PushItemOutcome(fact.event_id, ItemStatus.REJECTED, checked.code)
        document = dict(checked.document)
        stored = self.stored.get(fact.event_id)
        if stored is None:
            self.stored[fact.event_id] = document
            return PushItemOutcome(fact.event_id, ItemStatus.ACCEPTED, None)
        if stored != document:
            return PushItemOutcome(fact.event_id, ItemStatus.REJECTED, ItemRejectCode.ID_CONFLICT)
        return PushItemOutcome(fact.event_id, ItemStatus.DUPLICATE, None)
