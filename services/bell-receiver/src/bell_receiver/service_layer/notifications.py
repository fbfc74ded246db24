"""The caller's inbox: a page of their notifications, and marking one read or unread."""

from __future__ import annotations

from bell_receiver.domain.errors import NotificationNotFound
from bell_receiver.domain.inbox import NotificationRow
from bell_receiver.domain.paging import PagePosition, page_of
from bell_receiver.service_layer.ports import UnitOfWorkFactory
from yovision_platform.web import KeysetPage


def _position(row: NotificationRow) -> PagePosition:
    return PagePosition(row.occurred_at, row.id)


class Notifications:
    def __init__(self, uow: UnitOfWorkFactory) -> None:
        self._uow = uow

    async def page(
        self, user_id: str, limit: int, after: PagePosition | None
    ) -> KeysetPage[NotificationRow, PagePosition]:
        async with self._uow() as uow:
            rows = await uow.inbox.page(user_id, limit + 1, after)
        return page_of(rows, limit, _position)

    async def mark(self, user_id: str, notification_id: int, *, read: bool) -> None:
        """Idempotent; `NotificationNotFound` when the user has no such notification."""
        async with self._uow() as uow:
            found = await uow.inbox.set_read(user_id, notification_id, read=read)
        if not found:
            raise NotificationNotFound
