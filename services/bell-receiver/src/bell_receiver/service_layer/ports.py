"""The ports bell-receiver's use cases take: its stores, its unit of work and the audit trail's reader.

Two adapters each: PostgreSQL (`bell_receiver.adapters`) and the in-memory fakes
(`bell_receiver.adapters.memory`), proven equal by the contract suites in ``tests/ports/bell_receiver``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from bell_receiver.domain.audit import AppendResult, AuditFilter, AuditRow, Channel, StoredAuditEvent
from bell_receiver.domain.inbox import NewNotification, NotificationRow
from bell_receiver.domain.paging import PagePosition
from bell_receiver.domain.receipts import Receipt
from yovision_platform.storage import UnitOfWork


class AuditTrailStore(Protocol):
    """The immutable audit trail, unique on ``(source_system, event_id)``."""

    async def append(self, rows: Sequence[AuditRow], channel: Channel) -> list[AppendResult]:
        """Store the rows whose id is new; one result per row, in order, with the digest now stored for it.

        The rows share one ``source_system`` and have distinct event ids (else ValueError, nothing
        stored). A known id is `SAME_DIGEST` or `OTHER_DIGEST` and keeps its first row."""
        ...


class InboxStore(Protocol):
    """The per-user notification inbox and its read marks."""

    async def add(self, notification: NewNotification) -> None:
        """Add it unless ``(source_system, event_id)`` is already in the inbox (then nothing changes)."""
        ...

    async def page(self, user_id: str, limit: int, after: PagePosition | None) -> list[NotificationRow]:
        """The user's notifications older than `after`, newest first by ``(occurred_at, id)``."""
        ...

    async def set_read(self, user_id: str, notification_id: int, *, read: bool) -> bool:
        """Mark the user's notification read (the first read time stays) or unread; False when the user
        has no such notification."""
        ...


class ReceiptStore(Protocol):
    """Nonce receipts of signed batches, kept for their lifetime by the database clock."""

    async def lock(self, key_id: str, nonce: str) -> None:
        """Serialize requests with this (key id, nonce) until the unit of work ends."""
        ...

    async def find_live(self, key_id: str, nonce: str) -> Receipt | None:
        """The unexpired receipt of (key id, nonce); an expired one is removed and ignored."""
        ...

    async def store(self, key_id: str, nonce: str, receipt: Receipt) -> None:
        """Keep `receipt` for (key id, nonce), which has no live receipt (the caller holds its lock)."""
        ...

    async def purge_expired(self) -> int:
        """Remove every expired receipt; how many."""
        ...


class AuditReader(Protocol):
    """The audit trail as the read API pages it (committed rows; no unit of work)."""

    async def page(
        self, where: AuditFilter, limit: int, after: PagePosition | None
    ) -> list[StoredAuditEvent]:
        """At most `limit` rows matching `where` and older than `after`, newest first by
        ``(occurred_at, id)``."""
        ...


class BellStores(Protocol):
    """The stores of Bell's unit of work."""

    @property
    def audit_trail(self) -> AuditTrailStore: ...

    @property
    def inbox(self) -> InboxStore: ...

    @property
    def receipts(self) -> ReceiptStore: ...


class BellUnitOfWork(UnitOfWork, BellStores, Protocol):
    """One transaction over Bell's stores (and the outbox)."""


UnitOfWorkFactory = Callable[[], BellUnitOfWork]
