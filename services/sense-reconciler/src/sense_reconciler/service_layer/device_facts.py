"""The facts every device change writes in its transaction: the device event (device topic, key = device
id: the full device state, never the source URI) and the redacted device-audit fact (the audit push's outbox
row plus the DeviceAuditRecorded event).

A change of one device enqueues its two events as it goes (`publish`, `audit`). A change of many devices in
one transaction collects them (`device_event`, `audit_event`) and enqueues them all in one round trip
(`OutboxWriter.enqueue_many`), in the same order."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sense_reconciler.domain.records import AuditFact, DeviceRow
from sense_reconciler.service_layer.ports import SenseUnitOfWork
from yovision_platform import audit_push
from yovision_platform.messaging import AvroSerde, OutboxMessage, build_event


class DeviceFacts:
    def __init__(self, serde: AvroSerde, *, device_topic: str) -> None:
        self._serde = serde
        self._device_topic = device_topic

    async def publish(
        self, uow: SenseUnitOfWork, event_type: str, device: DeviceRow, extra: dict[str, Any]
    ) -> None:
        await uow.outbox.enqueue(self.device_event(event_type, device, extra))

    async def audit(
        self, uow: SenseUnitOfWork, action: str, actor: str, device: DeviceRow, changed: Sequence[str]
    ) -> None:
        await uow.outbox.enqueue(await self.audit_event(uow, action, actor, device, changed))

    def device_event(self, event_type: str, device: DeviceRow, extra: dict[str, Any]) -> OutboxMessage:
        payload = {
            "device_id": str(device.id),
            "tenant_id": device.tenant_id,
            "site_id": device.site_id,
            "name": device.name,
            "path_name": device.path_name,
            "media_server_id": device.media_server_id,
            "desired_state": device.desired_state,
            "config_version": device.config_version,
            **extra,
        }
        event = build_event(self._serde, event_type, str(device.id), payload)
        return OutboxMessage.from_event(event, topic=self._device_topic)

    async def audit_event(
        self, uow: SenseUnitOfWork, action: str, actor: str, device: DeviceRow, changed: Sequence[str]
    ) -> OutboxMessage:
        """The device-audit fact, in the outbox the audit push reads (written now) and, in the same canonical
        form, as a DeviceAuditRecorded event (returned, for the caller to enqueue): one id, one time (the
        database clock at whole milliseconds)."""
        fact = AuditFact(
            event_id=uuid.uuid4(), action=action, actor=actor, device=device, changed_fields=changed
        )
        occurred_at = await uow.devices.insert_fact(fact)
        document = audit_push.fact_document(
            fact_version=fact.fact_version,
            event_id=fact.event_id,
            occurred_at=occurred_at,
            tenant_id=device.tenant_id,
            site_id=device.site_id,
            device_id=str(device.id),
            action=action,
            actor=actor,
            changed_fields=changed,
            config_version=device.config_version,
        )
        parts = audit_push.audit_event_parts(document)
        event = build_event(
            self._serde,
            audit_push.EVENT_TYPE,
            str(device.id),
            parts.payload,
            event_id=parts.event_id,
            occurred_at_ms=parts.occurred_at_ms,
            correlation_id=parts.correlation_id,
        )
        return OutboxMessage.from_event(event)
