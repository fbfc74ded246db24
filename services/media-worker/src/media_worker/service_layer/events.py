"""Building media events and putting them in the outbox, inside the caller's transaction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yovision_platform.avro import AvroSerde
from yovision_platform.db import DbConnection
from yovision_platform.events import build_event
from yovision_platform.outbox import Outbox, OutboxMessage

__all__ = ["EventWriter"]


class EventWriter:
    def __init__(self, serde: AvroSerde, outbox: Outbox, *, topic: str | None = None) -> None:
        self._serde = serde
        self._outbox = outbox
        self._topic = topic

    async def emit(
        self, conn: DbConnection, event_type: str, material_id: str, payload: Mapping[str, Any]
    ) -> None:
        record = build_event(self._serde, event_type, material_id, {"material_id": material_id, **payload})
        await self._outbox.enqueue(conn, OutboxMessage.from_event(record, topic=self._topic))
