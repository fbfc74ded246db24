"""Sites: the per-site limit of enabled video devices, and the MediaMTX server the site is assigned to.

Moving a site to another registered server is ONE transaction over the site and every device of it: each
device gets the new server, a new config version, a DeviceConfigChanged event (`changed_fields =
[media_server_id]`), an audit fact and a due row on the new server. The reconciler then creates the path on
the new server and deletes it, exactly, on the old one (service_layer.reconcile_item). After the commit,
`wake_reconciler` gets the moved devices (see service_layer.devices).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sense_reconciler.domain import limits
from sense_reconciler.domain.errors import InvalidDeviceInput, SiteLimitReached
from sense_reconciler.domain.model import (
    validate_actor,
    validate_id,
    validate_max_video_channels,
    validate_media_server_id,
)
from sense_reconciler.domain.records import DeviceUpdate, SiteRow
from sense_reconciler.service_layer.device_facts import DeviceFacts
from sense_reconciler.service_layer.ports import SenseUnitOfWork, UnitOfWorkFactory
from yovision_platform.messaging import OutboxMessage


@dataclass(frozen=True)
class SiteView:
    tenant_id: str
    site_id: str
    max_video_channels: int
    media_server_id: str
    enabled_devices: int


class Sites:
    def __init__(
        self,
        units: UnitOfWorkFactory,
        facts: DeviceFacts,
        *,
        media_servers: frozenset[str],
        default_media_server: str,
        wake_reconciler: Callable[[Iterable[uuid.UUID]], None],
    ) -> None:
        if default_media_server not in media_servers:
            raise ValueError("the default media server must be registered")
        self._units = units
        self._facts = facts
        self._media_servers = media_servers
        self._default_server = default_media_server
        self._wake = wake_reconciler

    async def lock(self, uow: SenseUnitOfWork, tenant_id: str, site_id: str) -> SiteRow:
        """The site row, locked; created with the default limit and server when it does not exist yet."""
        return await uow.sites.lock(tenant_id, site_id, new_site_server=self._default_server)

    async def get_site(self, tenant_id: str, site_id: str) -> SiteView:
        """The site with its enabled-device count; a site Sense never saw has the defaults and none."""
        tenant_id, site_id = validate_id(tenant_id, "tenant_id"), validate_id(site_id, "site_id")
        async with self._units() as uow:
            return await self._view(uow, tenant_id, site_id)

    async def _view(self, uow: SenseUnitOfWork, tenant_id: str, site_id: str) -> SiteView:
        site = await uow.sites.get(tenant_id, site_id)
        if site is None:
            default = limits.SITE_MAX_VIDEO_CHANNELS_DEFAULT
            return SiteView(tenant_id, site_id, default, self._default_server, 0)
        enabled = await uow.devices.count_enabled(tenant_id, site_id)
        return SiteView(tenant_id, site_id, site.max_video_channels, site.media_server_id, enabled)

    async def configure_site(
        self,
        tenant_id: str,
        site_id: str,
        *,
        max_video_channels: int | None,
        media_server_id: str | None,
        actor: str,
    ) -> SiteView:
        """Set the site's limit and/or move it to another registered MediaMTX server, in one transaction.
        The limit is refused below the number of devices enabled now; an unknown server is refused."""
        tenant_id, site_id = validate_id(tenant_id, "tenant_id"), validate_id(site_id, "site_id")
        if max_video_channels is None and media_server_id is None:
            raise InvalidDeviceInput("body")
        if max_video_channels is not None:
            validate_max_video_channels(max_video_channels)
        if media_server_id is not None:
            validate_media_server_id(media_server_id, self._media_servers)
        actor = validate_actor(actor)
        moved: list[uuid.UUID] = []
        async with self._units() as uow:
            site = await self.lock(uow, tenant_id, site_id)
            if max_video_channels is not None:
                if await uow.devices.count_enabled(tenant_id, site_id) > max_video_channels:
                    raise SiteLimitReached()
                await uow.sites.set_limit(tenant_id, site_id, max_video_channels)
            if media_server_id is not None and media_server_id != site.media_server_id:
                moved = await self._move(uow, tenant_id, site_id, media_server_id, actor)
            view = await self._view(uow, tenant_id, site_id)
        self._wake(moved)
        return view

    async def _move(
        self, uow: SenseUnitOfWork, tenant_id: str, site_id: str, media_server_id: str, actor: str
    ) -> list[uuid.UUID]:
        """Move the site and its devices; returns the devices made due."""
        await uow.sites.set_server(tenant_id, site_id, media_server_id)
        changed = ["media_server_id"]
        events: list[OutboxMessage] = []
        moved: list[uuid.UUID] = []
        for current in await uow.devices.of_site(tenant_id, site_id):
            device = await uow.devices.update(
                current.id,
                DeviceUpdate(
                    name=current.name,
                    source_uri_ciphertext=None,
                    desired_state=current.desired_state,
                    media_server_id=media_server_id,
                ),
            )
            await uow.devices.mark_due(device.id, media_server_id)
            moved.append(device.id)
            events.append(
                self._facts.device_event(
                    "DeviceConfigChanged", device, {"previous_path_name": None, "changed_fields": changed}
                )
            )
            events.append(await self._facts.audit_event(uow, "device.config_changed", actor, device, changed))
        await uow.outbox.enqueue_many(events)
        return moved
