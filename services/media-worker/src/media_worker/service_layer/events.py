"""Building media events and putting them in the outbox of the caller's unit of work."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yovision_platform.messaging import AvroSerde, OutboxMessage, build_event
from yovision_platform.storage import OutboxWriter

__all__ = ["EventWriter"]


class EventWriter:
    def __init__(self, serde: AvroSerde, *, topic: str | None = None) -> None:
        self._serde = serde
        self._topic = topic

    async def emit(
        self, outbox: OutboxWriter, event_type: str, material_id: str, payload: Mapping[str, Any]
    ) -> None:
        record = build_event(self._serde, event_type, material_id, {"material_id": material_id, **payload})
        await outbox.enqueue(OutboxMessage.from_event(record, topic=self._topic))
