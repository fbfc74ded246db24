"""The events orphan-scanner publishes (topic orphan.scan.v1, key scan_id), through its outbox."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from yovision_platform.avro import AvroSerde
from yovision_platform.db import DbConnection, Identifier
from yovision_platform.events import build_event
from yovision_platform.outbox import Outbox, OutboxMessage


class OrphanEvents:
    def __init__(self, schema: Identifier, serde: AvroSerde) -> None:
        self._outbox = Outbox(schema)
        self._serde = serde

    async def publish(
        self,
        conn: DbConnection,
        event_type: str,
        scan_id: uuid.UUID,
        payload: Mapping[str, Any],
        *,
        correlation_id: uuid.UUID | None = None,
    ) -> None:
        """Enqueue the event in the caller's transaction."""
        event = build_event(
            self._serde,
            event_type,
            str(scan_id),
            {"scan_id": str(scan_id), **payload},
            event_id=uuid.uuid4(),
            correlation_id=str(correlation_id) if correlation_id else None,
        )
        await self._outbox.enqueue(conn, OutboxMessage.from_event(event))
