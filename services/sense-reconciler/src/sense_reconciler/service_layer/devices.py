"""Control API commands. Each mutation is ONE transaction that writes:

- the device row (and site row when new),
- a redacted device-audit fact in `device_operation_outbox` (fact version 2: changed field *names*),
- Kafka outbox events: the device event on the device topic (key = device id) and DeviceAuditRecorded,
- the reconcile due row (new generation, due now) whose `partition` is the device topic partition the
  producer will pick for the device id.

Source URIs go into the device row only: never into events, facts, errors or return values.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from sense_reconciler.adapters.device_repository import AuditFact, DeviceRepository, DeviceRow
from sense_reconciler.domain import limits
from sense_reconciler.domain.errors import DeviceNotFound, InvalidInput, PathNameTaken, SiteLimitReached
from sense_reconciler.domain.model import (
    DesiredState,
    check_site_capacity,
    validate_actor,
    validate_batch_size,
    validate_id,
    validate_max_video_channels,
    validate_name,
    validate_page_size,
    validate_path_name,
    validate_source_uri,
)
from yovision_platform import audit_relay
from yovision_platform.avro import AvroSerde
from yovision_platform.db import DbConnection
from yovision_platform.events import build_event
from yovision_platform.kafka import partition_for_key
from yovision_platform.outbox import Outbox, OutboxMessage


@dataclass(frozen=True)
class DevicePage:
    items: list[DeviceRow]
    next_after: uuid.UUID | None


class DeviceService:
    def __init__(
        self,
        pool: asyncpg.Pool,
        repository: DeviceRepository,
        serde: AvroSerde,
        *,
        device_topic: str,
        partitions: int,
    ) -> None:
        if partitions < 1:
            raise ValueError("partitions must be >= 1")
        self._pool = pool
        self._repo = repository
        self._serde = serde
        self._device_topic = device_topic
        self._partitions = partitions
        self._outbox = Outbox(repository.schema)

    def partition_of(self, device_id: uuid.UUID) -> int:
        """The device topic partition the producer picks for this device's key."""
        return partition_for_key(str(device_id).encode("utf-8"), self._partitions)

    async def create_device(
        self,
        *,
        tenant_id: str,
        site_id: str,
        name: str,
        path_name: str,
        source_uri: str,
        desired_state: DesiredState,
        actor: str,
    ) -> DeviceRow:
        tenant_id, site_id = validate_id(tenant_id, "tenant_id"), validate_id(site_id, "site_id")
        name, path_name = validate_name(name), validate_path_name(path_name)
        source_uri, actor = validate_source_uri(source_uri), validate_actor(actor)
        device_id = uuid.uuid4()
        async with self._pool.acquire() as conn, conn.transaction():
            limit = await self._repo.lock_site(conn, tenant_id, site_id)
            if desired_state is DesiredState.ENABLED:
                check_site_capacity(await self._repo.count_enabled(conn, tenant_id, site_id), 1, limit)
            try:
                async with conn.transaction():
                    device = await self._repo.insert_device(
                        conn,
                        device_id=device_id,
                        tenant_id=tenant_id,
                        site_id=site_id,
                        name=name,
                        path_name=path_name,
                        source_uri=source_uri,
                        desired_state=desired_state.value,
                    )
            except asyncpg.UniqueViolationError:
                raise PathNameTaken() from None
            await self._repo.insert_due_row(conn, device.id, self.partition_of(device.id))
            await self._publish(conn, "DeviceRegistered", device, {})
            await self._audit(conn, "device.created", actor, device, ["name", "path_name", "source_uri"])
        return device

    async def get_device(self, device_id: uuid.UUID) -> DeviceRow:
        async with self._pool.acquire() as conn:
            device = await self._repo.get(conn, device_id)
        if device is None:
            raise DeviceNotFound()
        return device

    async def list_devices(
        self,
        *,
        tenant_id: str | None,
        after: uuid.UUID | None,
        limit: int = limits.LIST_PAGE_SIZE_DEFAULT,
        site_id: str | None = None,
    ) -> DevicePage:
        validate_page_size(limit)
        if tenant_id is not None:
            validate_id(tenant_id, "tenant_id")
        if site_id is not None:
            validate_id(site_id, "site_id")
        async with self._pool.acquire() as conn:
            rows = await self._repo.list_page(
                conn, tenant_id=tenant_id, after=after, limit=limit + 1, site_id=site_id
            )
        more = len(rows) > limit
        items = rows[:limit]
        return DevicePage(items=items, next_after=items[-1].id if more else None)

    async def change_config(
        self, device_id: uuid.UUID, *, name: str | None, source_uri: str | None, actor: str
    ) -> DeviceRow:
        """Change the name and/or source URI. The path name is fixed at creation (the ledger path)."""
        if name is None and source_uri is None:
            raise InvalidInput("body")
        new_name = validate_name(name) if name is not None else None
        new_uri = validate_source_uri(source_uri) if source_uri is not None else None
        actor = validate_actor(actor)
        async with self._pool.acquire() as conn, conn.transaction():
            current = await self._locked(conn, device_id)
            changed = []
            if new_name is not None and new_name != current.name:
                changed.append("name")
            if new_uri is not None and await self._repo.source_uri_differs(conn, device_id, new_uri):
                changed.append("source_uri")
            if not changed:
                return current
            device = await self._repo.update_device(
                conn,
                device_id,
                name=new_name or current.name,
                source_uri=new_uri,
                desired_state=current.desired_state,
            )
            await self._repo.mark_due(conn, device_id)
            await self._publish(
                conn, "DeviceConfigChanged", device, {"previous_path_name": None, "changed_fields": changed}
            )
            await self._audit(conn, "device.config_changed", actor, device, changed)
        return device

    async def set_desired_state(self, device_id: uuid.UUID, state: DesiredState, *, actor: str) -> DeviceRow:
        devices = await self.set_desired_states([(device_id, state)], actor=actor)
        return devices[0]

    async def set_desired_states(
        self, items: Sequence[tuple[uuid.UUID, DesiredState]], *, actor: str
    ) -> list[DeviceRow]:
        """All or nothing: every item applies, or none does (unknown device, site limit reached).

        Returns the devices in input order."""
        validate_batch_size(len(items))
        actor = validate_actor(actor)
        wanted: dict[uuid.UUID, DesiredState] = {}
        for device_id, state in items:
            if wanted.setdefault(device_id, state) is not state:
                raise InvalidInput("items")
        async with self._pool.acquire() as conn, conn.transaction():
            current = {device_id: await self._locked(conn, device_id) for device_id in sorted(wanted)}
            changing = [d for d in current.values() if d.desired_state != wanted[d.id]]
            enabling = Counter(
                (d.tenant_id, d.site_id) for d in changing if wanted[d.id] is DesiredState.ENABLED
            )
            disabling = Counter(
                (d.tenant_id, d.site_id) for d in changing if wanted[d.id] is DesiredState.DISABLED
            )
            for site in sorted(enabling):
                limit = await self._repo.lock_site(conn, *site)
                enabled_after_disables = await self._repo.count_enabled(conn, *site) - disabling[site]
                check_site_capacity(enabled_after_disables, enabling[site], limit)
            result: dict[uuid.UUID, DeviceRow] = {}
            for device_id in sorted(wanted):
                before = current[device_id]
                if before.desired_state == wanted[device_id]:
                    result[device_id] = before
                    continue
                device = await self._repo.update_device(
                    conn, device_id, name=before.name, source_uri=None, desired_state=wanted[device_id].value
                )
                await self._repo.mark_due(conn, device_id)
                await self._publish(
                    conn,
                    "DeviceDesiredStateChanged",
                    device,
                    {"previous_desired_state": before.desired_state},
                )
                await self._audit(conn, "device.desired_state_changed", actor, device, ["desired_state"])
                result[device_id] = device
        return [result[device_id] for device_id, _ in items]

    async def reconcile_status(self, device_id: uuid.UUID) -> dict[str, Any]:
        async with self._pool.acquire() as conn:
            row = await self._repo.reconcile_status(conn, device_id)
        if row is None:
            raise DeviceNotFound()
        return dict(row)

    async def reconcile_statuses(self, device_ids: Sequence[uuid.UUID]) -> list[dict[str, Any]]:
        """The reconcile state of each known device of `device_ids` (unknown ids are left out)."""
        validate_page_size(len(device_ids))
        async with self._pool.acquire() as conn:
            rows = await self._repo.reconcile_statuses(conn, sorted(set(device_ids)))
        return [dict(row) for row in rows]

    async def site_limit(self, tenant_id: str, site_id: str) -> tuple[int, int]:
        """(max_video_channels, enabled devices); a site Sense never saw has the default limit and none."""
        tenant_id, site_id = validate_id(tenant_id, "tenant_id"), validate_id(site_id, "site_id")
        async with self._pool.acquire() as conn:
            known = await self._repo.site(conn, tenant_id, site_id)
        return known if known is not None else (limits.SITE_MAX_VIDEO_CHANNELS_DEFAULT, 0)

    async def set_site_limit(self, tenant_id: str, site_id: str, max_video_channels: int) -> int:
        """Set a site's enabled-device limit (1..128); refused below the number of devices enabled now."""
        tenant_id, site_id = validate_id(tenant_id, "tenant_id"), validate_id(site_id, "site_id")
        validate_max_video_channels(max_video_channels)
        async with self._pool.acquire() as conn, conn.transaction():
            await self._repo.lock_site(conn, tenant_id, site_id)
            if await self._repo.count_enabled(conn, tenant_id, site_id) > max_video_channels:
                raise SiteLimitReached()
            await self._repo.set_site_limit(conn, tenant_id, site_id, max_video_channels)
        return max_video_channels

    async def _locked(self, conn: DbConnection, device_id: uuid.UUID) -> DeviceRow:
        device = await self._repo.get(conn, device_id, for_update=True)
        if device is None:
            raise DeviceNotFound()
        return device

    async def _publish(
        self, conn: DbConnection, event_type: str, device: DeviceRow, extra: dict[str, Any]
    ) -> None:
        payload = {
            "device_id": str(device.id),
            "tenant_id": device.tenant_id,
            "site_id": device.site_id,
            "name": device.name,
            "path_name": device.path_name,
            "desired_state": device.desired_state,
            "config_version": device.config_version,
            **extra,
        }
        event = build_event(self._serde, event_type, str(device.id), payload)
        await self._outbox.enqueue(conn, OutboxMessage.from_event(event, topic=self._device_topic))

    async def _audit(
        self, conn: DbConnection, action: str, actor: str, device: DeviceRow, changed: Sequence[str]
    ) -> None:
        """The device-audit fact, in the outbox Bell's relay reads and, in the same canonical form, as a
        DeviceAuditRecorded event: one id, one time (the database clock at whole milliseconds)."""
        fact = AuditFact(
            event_id=uuid.uuid4(), action=action, actor=actor, device=device, changed_fields=changed
        )
        occurred_at = await self._repo.insert_fact(conn, fact)
        document = audit_relay.fact_document(
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
        parts = audit_relay.audit_event_parts(document)
        event = build_event(
            self._serde,
            audit_relay.EVENT_TYPE,
            str(device.id),
            parts.payload,
            event_id=parts.event_id,
            occurred_at_ms=parts.occurred_at_ms,
            correlation_id=parts.correlation_id,
        )
        await self._outbox.enqueue(conn, OutboxMessage.from_event(event))
