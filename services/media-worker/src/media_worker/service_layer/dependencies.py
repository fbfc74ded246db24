"""What the upload and transcode use cases of one instance share: its stores, locks, storage, event writer,
activity and id (`bootstrap` makes it once)."""

from __future__ import annotations

from dataclasses import dataclass

from media_worker.service_layer.activity import Activity
from media_worker.service_layer.events import EventWriter
from media_worker.service_layer.ports import MediaLocks, Storage, UnitOfWorkFactory

__all__ = ["InstanceDependencies"]


@dataclass(frozen=True)
class InstanceDependencies:
    uow: UnitOfWorkFactory
    locks: MediaLocks
    storage: Storage
    events: EventWriter
    activity: Activity
    instance_id: str
