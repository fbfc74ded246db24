"""Control API commands. Each mutation is ONE transaction that writes:

- the device row (and site row when new),
- a redacted device-audit fact in `device_operation_outbox` (fact version 2: changed field *names*),
- Kafka outbox events: the device event on the device topic (key = device id) and DeviceAuditRecorded,
- the reconcile due row (new generation, due now) whose `partition` is the device topic partition the
  producer will pick for the device id, and whose `media_server_id` is the server the device's path belongs
  on (its site's).

Sites, and moving a site to another MediaMTX server, are service_layer.sites.

After the commit of a change that made devices due, `wake_reconciler` gets their partitions: wired to
`OwnedPartitions.wake_for`, it starts this instance's writer at once when it owns one of them, without
waiting for the device event to come back through the outbox relay, Kafka and the consumer. The event still
wakes the owner wherever it runs; a lost wake-up is covered by the due-row scan.

Source URIs go into the device row only, encrypted (service_layer.source_uris): never into events, facts,
errors or return values.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sense_reconciler.domain import limits
from sense_reconciler.domain.errors import DeviceNotFound, InvalidDeviceInput
from sense_reconciler.domain.model import (
    DesiredState,
    check_site_capacity,
    validate_actor,
    validate_batch_size,
    validate_id,
    validate_name,
    validate_page_size,
    validate_path_name,
    validate_source_uri,
)
from sense_reconciler.domain.records import DeviceRow, DeviceUpdate, NewDevice, ReconcileState, SiteRow
from sense_reconciler.service_layer.device_facts import DeviceFacts
from sense_reconciler.service_layer.ports import SenseUnitOfWork, UnitOfWorkFactory
from sense_reconciler.service_layer.sites import Sites
from sense_reconciler.service_layer.source_uris import SourceUris
from yovision_platform.mediamtx import SINGLE_MEDIA_SERVER_ID
from yovision_platform.messaging import AvroSerde, OutboxMessage, partition_for_key
from yovision_platform.security import SecretUnreadable

WakeReconciler = Callable[[Iterable[int]], None]


def _no_wake(partitions: Iterable[int]) -> None:
    """No reconciler in this process (`SENSE_RECONCILER_ENABLED=false`): the device events wake the owner."""


@dataclass(frozen=True)
class DeviceRowPage:
    items: list[DeviceRow]
    next_after: uuid.UUID | None


class Devices:
    def __init__(
        self,
        units: UnitOfWorkFactory,
        serde: AvroSerde,
        *,
        device_topic: str,
        partitions: int,
        sources: SourceUris,
        media_servers: frozenset[str] = frozenset({SINGLE_MEDIA_SERVER_ID}),
        default_media_server: str = SINGLE_MEDIA_SERVER_ID,
        wake_reconciler: WakeReconciler = _no_wake,
    ) -> None:
        if partitions < 1:
            raise ValueError("partitions must be >= 1")
        self._units = units
        self._partitions = partitions
        self._sources = sources
        self._facts = DeviceFacts(serde, device_topic=device_topic)
        self._wake = wake_reconciler
        self.sites = Sites(
            units,
            self._facts,
            media_servers=media_servers,
            default_media_server=default_media_server,
            wake_reconciler=lambda device_ids: wake_reconciler(map(self.partition_of, device_ids)),
        )

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
        sealed = self._sources.seal(device_id, source_uri)
        async with self._units() as uow:
            site = await self._lock_site(uow, tenant_id, site_id)
            if desired_state is DesiredState.ENABLED:
                check_site_capacity(
                    await uow.devices.count_enabled(tenant_id, site_id), 1, site.max_video_channels
                )
            device = await uow.devices.add(
                NewDevice(
                    id=device_id,
                    tenant_id=tenant_id,
                    site_id=site_id,
                    name=name,
                    path_name=path_name,
                    source_uri_ciphertext=sealed,
                    desired_state=desired_state.value,
                    media_server_id=site.media_server_id,
                )
            )
            await uow.devices.insert_due_row(device.id, self.partition_of(device.id), device.media_server_id)
            await self._facts.publish(uow, "DeviceRegistered", device, {})
            await self._facts.audit(uow, "device.created", actor, device, ["name", "path_name", "source_uri"])
        self._wake([self.partition_of(device.id)])
        return device

    async def get_device(self, device_id: uuid.UUID) -> DeviceRow:
        async with self._units() as uow:
            device = await uow.devices.get(device_id)
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
    ) -> DeviceRowPage:
        validate_page_size(limit)
        if tenant_id is not None:
            validate_id(tenant_id, "tenant_id")
        if site_id is not None:
            validate_id(site_id, "site_id")
        async with self._units() as uow:
            rows = await uow.devices.list_page(
                tenant_id=tenant_id, site_id=site_id, after=after, limit=limit + 1
            )
        more = len(rows) > limit
        items = rows[:limit]
        return DeviceRowPage(items=items, next_after=items[-1].id if more else None)

    async def change_config(
        self, device_id: uuid.UUID, *, name: str | None, source_uri: str | None, actor: str
    ) -> DeviceRow:
        """Change the name and/or source URI. The path name is fixed at creation (the ledger path)."""
        if name is None and source_uri is None:
            raise InvalidDeviceInput("body")
        new_name = validate_name(name) if name is not None else None
        new_uri = validate_source_uri(source_uri) if source_uri is not None else None
        actor = validate_actor(actor)
        async with self._units() as uow:
            current = await self._locked(uow, device_id)
            changed = []
            if new_name is not None and new_name != current.name:
                changed.append("name")
            if new_uri is not None and await self._source_differs(uow, device_id, new_uri):
                changed.append("source_uri")
            if not changed:
                return current
            sealed = None
            if new_uri is not None and "source_uri" in changed:
                sealed = self._sources.seal(device_id, new_uri)
            device = await uow.devices.update(
                device_id,
                DeviceUpdate(
                    name=new_name or current.name,
                    source_uri_ciphertext=sealed,
                    desired_state=current.desired_state,
                ),
            )
            await uow.devices.mark_due(device_id, device.media_server_id, replace_due="source_uri" in changed)
            await self._facts.publish(
                uow, "DeviceConfigChanged", device, {"previous_path_name": None, "changed_fields": changed}
            )
            await self._facts.audit(uow, "device.config_changed", actor, device, changed)
        self._wake([self.partition_of(device.id)])
        return device

    async def set_desired_state(self, device_id: uuid.UUID, state: DesiredState, *, actor: str) -> DeviceRow:
        devices = await self.set_desired_states([(device_id, state)], actor=actor)
        return devices[0]

    async def set_desired_states(
        self, items: Sequence[tuple[uuid.UUID, DesiredState]], *, actor: str
    ) -> list[DeviceRow]:
        """All or nothing: every item applies, or none does (unknown device, site limit reached). A device
        listed more than once takes the state of its last item and changes at most once.

        Returns the devices in input order (a device listed twice: its final row at each place)."""
        validate_batch_size(len(items))
        actor = validate_actor(actor)
        wanted = dict(items)  # in order: a device listed twice takes its last state
        async with self._units() as uow:
            current = {device_id: await self._locked(uow, device_id) for device_id in sorted(wanted)}
            changing = [d for d in current.values() if d.desired_state != wanted[d.id]]
            enabling = Counter(
                (d.tenant_id, d.site_id) for d in changing if wanted[d.id] is DesiredState.ENABLED
            )
            disabling = Counter(
                (d.tenant_id, d.site_id) for d in changing if wanted[d.id] is DesiredState.DISABLED
            )
            for tenant_id, site_id in sorted(enabling):
                site = await self._lock_site(uow, tenant_id, site_id)
                enabled = await uow.devices.count_enabled(tenant_id, site_id)
                enabled_after_disables = enabled - disabling[(tenant_id, site_id)]
                check_site_capacity(
                    enabled_after_disables, enabling[(tenant_id, site_id)], site.max_video_channels
                )
            result: dict[uuid.UUID, DeviceRow] = {}
            events: list[OutboxMessage] = []
            due: list[uuid.UUID] = []
            for device_id in sorted(wanted):
                before = current[device_id]
                if before.desired_state == wanted[device_id]:
                    result[device_id] = before
                    continue
                device = await uow.devices.update(
                    device_id,
                    DeviceUpdate(
                        name=before.name, source_uri_ciphertext=None, desired_state=wanted[device_id].value
                    ),
                )
                await uow.devices.mark_due(device_id, device.media_server_id)
                due.append(device_id)
                events.append(
                    self._facts.device_event(
                        "DeviceDesiredStateChanged", device, {"previous_desired_state": before.desired_state}
                    )
                )
                events.append(
                    await self._facts.audit_event(
                        uow, "device.desired_state_changed", actor, device, ["desired_state"]
                    )
                )
                result[device_id] = device
            await uow.outbox.enqueue_many(events)
        self._wake(map(self.partition_of, due))
        return [result[device_id] for device_id, _ in items]

    async def reconcile_status(self, device_id: uuid.UUID) -> ReconcileState:
        async with self._units() as uow:
            state = await uow.devices.reconcile_state(device_id)
        if state is None:
            raise DeviceNotFound()
        return state

    async def reconcile_statuses(self, device_ids: Sequence[uuid.UUID]) -> list[ReconcileState]:
        """The reconcile state of each known device of `device_ids` (unknown ids are left out)."""
        validate_page_size(len(device_ids))
        async with self._units() as uow:
            return await uow.devices.reconcile_states(sorted(set(device_ids)))

    async def _lock_site(self, uow: SenseUnitOfWork, tenant_id: str, site_id: str) -> SiteRow:
        return await self.sites.lock(uow, tenant_id, site_id)

    async def _source_differs(self, uow: SenseUnitOfWork, device_id: uuid.UUID, source_uri: str) -> bool:
        stored = await uow.devices.stored_source(device_id)
        try:
            return self._sources.reveal(device_id, stored) != source_uri
        except SecretUnreadable:
            return True  # a stored value nobody can read any more: the new one replaces it

    async def _locked(self, uow: SenseUnitOfWork, device_id: uuid.UUID) -> DeviceRow:
        device = await uow.devices.get(device_id, for_update=True)
        if device is None:
            raise DeviceNotFound()
        return device
