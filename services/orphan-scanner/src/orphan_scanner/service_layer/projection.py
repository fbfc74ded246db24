"""The ownership projection: Sense's device and path-ownership events into the projection store (claims and
ownership evidence). The platform's IdempotentConsumer calls it with the unit of work of its own
transaction (entrypoints.projection_consumer), so an event's effect, its processed_events row and the
partition position commit together and `consumer_positions` says how far the projection is.

Only Sense's own events are accepted; any other type or source is dead-lettered with a stable code rather
than ignored, so a new Sense event type cannot silently bypass the projection.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from orphan_scanner.domain.projected_events import DEVICE_EVENT_TYPES, PROJECTED_EVENT_TYPES
from orphan_scanner.domain.records import DeviceClaim, OwnershipEvidence
from orphan_scanner.service_layer.ports import OrphanUnitOfWork
from yovision_platform.mediamtx import MEDIA_SERVER_ID_PATTERN, SINGLE_MEDIA_SERVER_ID
from yovision_platform.messaging import EventCatalog, EventRejected, InboundEvent, default_catalog

DESIRED_STATES = frozenset({"enabled", "disabled"})


class OwnershipProjector:
    def __init__(self, catalog: EventCatalog | None = None) -> None:
        self._catalog = catalog or default_catalog()

    async def apply(self, uow: OrphanUnitOfWork, event: InboundEvent) -> None:
        """Apply one Sense event in `uow` (the consumer's transaction); anything else is rejected
        (`EventRejected`: dead-lettered) before anything is written."""
        if event.event_type not in PROJECTED_EVENT_TYPES:
            raise EventRejected("unsupported_event_type")
        if event.source_system != self._catalog.source_system_of(event.event_type):
            raise EventRejected("unexpected_source_system")
        if event.event_type in DEVICE_EVENT_TYPES:
            claim = device_claim(event.event_id, event.record)
            async with uow:
                await uow.projection.apply_claim(claim)
        else:
            evidence = ownership_evidence(event.record)
            async with uow:
                await uow.projection.record_ownership(evidence)


def device_claim(event_id: uuid.UUID, record: Mapping[str, Any]) -> DeviceClaim:
    desired_state = record["desired_state"]
    if desired_state not in DESIRED_STATES:
        raise EventRejected("invalid_field")
    return DeviceClaim(
        device_id=_uuid(record["device_id"]),
        tenant_id=record["tenant_id"],
        site_id=record["site_id"],
        path_name=record["path_name"],
        media_server_id=_server(record.get("media_server_id")),
        desired_state=desired_state,
        config_version=int(record["config_version"]),
        event_id=event_id,
        occurred_at=_timestamp(record["envelope"]["occurred_at"]),
    )


def ownership_evidence(record: Mapping[str, Any]) -> OwnershipEvidence:
    first, last = _timestamp(record["first_seen_at"]), _timestamp(record["last_seen_at"])
    if last < first:
        raise EventRejected("invalid_field")
    return OwnershipEvidence(
        path_name=record["path_name"],
        # evidence from before several servers was recorded on the single server
        media_server_id=_server(record.get("media_server_id")) or SINGLE_MEDIA_SERVER_ID,
        device_id=_uuid(record["device_id"]),
        tenant_id=record["tenant_id"],
        site_id=record["site_id"],
        first_seen_at=first,
        last_seen_at=last,
    )


def _server(value: object) -> str | None:
    """A server id as Sense validates them (None: an event from before several servers)."""
    if value is None:
        return None
    if not isinstance(value, str) or MEDIA_SERVER_ID_PATTERN.fullmatch(value) is None:
        raise EventRejected("invalid_field")
    return value


def _uuid(value: object) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise EventRejected("invalid_field") from None


def _timestamp(value: object) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise EventRejected("invalid_field")
    return value
