"""The events orphan-scanner publishes (topic orphan.scan.v1, key scan_id): built here, enqueued by the use
case in its unit of work's outbox, so each commits with the state it announces."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from yovision_platform.messaging import AvroSerde, OutboxMessage, build_event


class OrphanEvents:
    def __init__(self, serde: AvroSerde) -> None:
        self._serde = serde

    def message(
        self,
        event_type: str,
        scan_id: uuid.UUID,
        payload: Mapping[str, Any],
        *,
        correlation_id: uuid.UUID | None = None,
    ) -> OutboxMessage:
        event = build_event(
            self._serde,
            event_type,
            str(scan_id),
            {"scan_id": str(scan_id), **payload},
            event_id=uuid.uuid4(),
            correlation_id=str(correlation_id) if correlation_id else None,
        )
        return OutboxMessage.from_event(event)
