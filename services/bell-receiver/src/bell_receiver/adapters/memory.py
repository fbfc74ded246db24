"""In-memory fakes of Bell's ports, for fast use-case tests (tests/unit/bell_receiver).

Each behaves as its PostgreSQL adapter does, as far as the contract suites in ``tests/ports/bell_receiver``
prove: ordering, uniqueness, not-found, expiry. They model one transaction at a time: the receipt lock is
a no-op (concurrent requests on one nonce are tested on PostgreSQL only).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bell_receiver.domain.audit import (
    AppendOutcome,
    AppendResult,
    AuditFilter,
    AuditRow,
    Channel,
    StoredAuditEvent,
    check_appendable,
)
from bell_receiver.domain.inbox import NewNotification, NotificationRow
from bell_receiver.domain.paging import PagePosition
from bell_receiver.domain.receipts import Receipt
from yovision_platform.security import NONCE_RECEIPT_TTL_SECONDS
from yovision_platform.storage import MemoryUnitOfWork

if TYPE_CHECKING:
    from bell_receiver.service_layer.ports import BellUnitOfWork, UnitOfWorkFactory

Clock = Callable[[], float]


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _newest_first(position: PagePosition) -> tuple[datetime, int]:
    return position.occurred_at, position.id


class MemoryAuditTrail:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, uuid.UUID], StoredAuditEvent] = {}

    async def append(self, rows: Sequence[AuditRow], channel: Channel) -> list[AppendResult]:
        check_appendable(rows)
        results: list[AppendResult] = []
        for row in rows:
            key = (row.source_system, row.event_id)
            known = self.rows.get(key)
            if known is None:
                copied = {**vars(row), "payload": dict(row.payload)}
                self.rows[key] = StoredAuditEvent(
                    **copied, id=len(self.rows) + 1, received_at=_utc_now(), channel=channel
                )
                results.append(AppendResult(AppendOutcome.INSERTED, row.digest))
            else:
                same = known.digest == row.digest
                results.append(
                    AppendResult(
                        AppendOutcome.SAME_DIGEST if same else AppendOutcome.OTHER_DIGEST, known.digest
                    )
                )
        return results


class MemoryAuditReader:
    """Reads the committed rows of a `MemoryAuditTrail`."""

    def __init__(self, trail: MemoryAuditTrail) -> None:
        self._trail = trail

    async def page(
        self, where: AuditFilter, limit: int, after: PagePosition | None
    ) -> list[StoredAuditEvent]:
        def matches(row: StoredAuditEvent) -> bool:
            equal = all(
                getattr(where, column) in (None, getattr(row, column))
                for column in ("source_system", "event_type", "device_id", "actor")
            )
            return (
                equal
                and (where.occurred_from is None or row.occurred_at >= where.occurred_from)
                and (where.occurred_before is None or row.occurred_at < where.occurred_before)
                and (after is None or (row.occurred_at, row.id) < _newest_first(after))
            )

        found = [row for row in self._trail.rows.values() if matches(row)]
        found.sort(key=lambda row: (row.occurred_at, row.id), reverse=True)
        return found[:limit]


class MemoryInbox:
    def __init__(self) -> None:
        self.rows: list[NotificationRow] = []

    async def add(self, notification: NewNotification) -> None:
        if any(
            (row.source_system, row.event_id) == (notification.source_system, notification.event_id)
            for row in self.rows
        ):
            return
        copied = {**vars(notification), "data": dict(notification.data)}
        self.rows.append(NotificationRow(**copied, id=len(self.rows) + 1))

    async def page(self, user_id: str, limit: int, after: PagePosition | None) -> list[NotificationRow]:
        mine = [
            row
            for row in self.rows
            if row.user_id == user_id and (after is None or (row.occurred_at, row.id) < _newest_first(after))
        ]
        mine.sort(key=lambda row: (row.occurred_at, row.id), reverse=True)
        return mine[:limit]

    async def set_read(self, user_id: str, notification_id: int, *, read: bool) -> bool:
        for index, row in enumerate(self.rows):
            if row.id == notification_id and row.user_id == user_id:
                if not read:
                    self.rows[index] = replace(row, read_at=None)
                elif row.read_at is None:
                    self.rows[index] = replace(row, read_at=_utc_now())
                return True
        return False


class _SharedClock:
    """A clock the unit of work's snapshot leaves alone: a rollback restores the receipts, not the time."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def __call__(self) -> float:
        return self._clock()

    def __deepcopy__(self, memo: dict[int, object]) -> _SharedClock:
        return self


@dataclass(frozen=True)
class _StoredReceipt:
    receipt: Receipt
    expires_at: float


class MemoryReceiptStore:
    """Receipts that expire `NONCE_RECEIPT_TTL_SECONDS` after they are stored, on `clock` (the fake's
    database clock; tests move it, or `expire` one receipt)."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.receipts: dict[tuple[str, str], _StoredReceipt] = {}
        self._clock = _SharedClock(clock)

    async def lock(self, key_id: str, nonce: str) -> None:
        return None

    async def find_live(self, key_id: str, nonce: str) -> Receipt | None:
        stored = self.receipts.get((key_id, nonce))
        if stored is None:
            return None
        if stored.expires_at <= self._clock():
            del self.receipts[(key_id, nonce)]
            return None
        return stored.receipt

    async def store(self, key_id: str, nonce: str, receipt: Receipt) -> None:
        if (key_id, nonce) in self.receipts:
            raise ValueError("a receipt of this (key id, nonce) is stored already")
        self.receipts[(key_id, nonce)] = _StoredReceipt(receipt, self._clock() + NONCE_RECEIPT_TTL_SECONDS)

    async def purge_expired(self) -> int:
        now = self._clock()
        expired = [key for key, stored in self.receipts.items() if stored.expires_at <= now]
        for key in expired:
            del self.receipts[key]
        return len(expired)

    def expire(self, key_id: str, nonce: str) -> None:
        """Age one receipt past its lifetime (as the PostgreSQL suites do with an owner's UPDATE)."""
        stored = self.receipts[(key_id, nonce)]
        self.receipts[(key_id, nonce)] = replace(stored, expires_at=self._clock())


class MemoryBellUnitOfWork(MemoryUnitOfWork):
    def __init__(self, clock: Clock = time.monotonic) -> None:
        super().__init__()
        self.audit_trail = MemoryAuditTrail()
        self.inbox = MemoryInbox()
        self.receipts = MemoryReceiptStore(clock)

    def stores(self) -> Sequence[object]:
        return (self.audit_trail, self.inbox, self.receipts)

    def factory(self) -> UnitOfWorkFactory:
        """This fake as the use cases' port: every unit of work they open is this one."""
        port: BellUnitOfWork = self
        return lambda: port

    def reader(self) -> MemoryAuditReader:
        return MemoryAuditReader(self.audit_trail)
