"""Drain use cases: stop taking new work, report whether this instance may be stopped, list the instances."""

from __future__ import annotations

from dataclasses import dataclass

from media_worker.domain.drain import ActiveWork, DrainVerdict, drain_verdict
from media_worker.service_layer.activity import Activity
from media_worker.service_layer.ports import Capability, InstanceRecord, UnitOfWorkFactory

__all__ = ["INSTANCES_SHOWN_MAX", "Drain", "DrainReport"]

INSTANCES_SHOWN_MAX = 100


@dataclass(frozen=True)
class DrainReport:
    instance_id: str
    capability_instance_id: str | None
    draining: bool
    work: ActiveWork
    verdict: DrainVerdict


class Drain:
    def __init__(
        self, uow: UnitOfWorkFactory, activity: Activity, capability: Capability, *, instance_id: str
    ) -> None:
        self._uow = uow
        self._activity = activity
        self._capability = capability
        self.instance_id = instance_id

    async def request(self) -> DrainReport:
        """Stop taking new jobs and uploads (in-flight work finishes); the request is recorded."""
        self._activity.draining = True
        async with self._uow() as uow:
            await uow.instances.set_draining(self.instance_id)
        return self.report()

    def report(self) -> DrainReport:
        capability = self._capability.read()
        work = self._activity.snapshot()
        draining = self._activity.draining
        verdict = drain_verdict(self.instance_id, capability, draining, work)
        return DrainReport(self.instance_id, capability, draining, work, verdict)

    async def instances(self) -> list[InstanceRecord]:
        """Every instance that registered, with its recorded drain request and leased jobs (what the
        database knows; whether one may be stopped is only its own `report`)."""
        async with self._uow() as uow:
            return await uow.listing.instances(INSTANCES_SHOWN_MAX)

    async def register(self) -> None:
        """Record this instance as started (not draining) and publish its capability."""
        async with self._uow() as uow:
            await uow.instances.register(self.instance_id)
        self._capability.publish(self.instance_id)
