"""The global audit trail as operators read it: filtered, newest first, keyset-paged."""

from __future__ import annotations

from bell_receiver.domain.audit import AuditFilter, StoredAuditEvent
from bell_receiver.domain.paging import PagePosition, page_of
from bell_receiver.service_layer.ports import AuditReader
from yovision_platform.web import KeysetPage


def _position(row: StoredAuditEvent) -> PagePosition:
    return PagePosition(row.occurred_at, row.id)


class AuditEvents:
    def __init__(self, reader: AuditReader) -> None:
        self._reader = reader

    async def page(
        self, where: AuditFilter, limit: int, after: PagePosition | None
    ) -> KeysetPage[StoredAuditEvent, PagePosition]:
        """An empty time range (`occurred_from` not before `occurred_before`) is an empty page."""
        if where.empty_range:
            return KeysetPage([], None)
        return page_of(await self._reader.page(where, limit + 1, after), limit, _position)
