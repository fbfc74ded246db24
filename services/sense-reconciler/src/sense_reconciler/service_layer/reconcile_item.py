"""One claimed item: renew -> MediaMTX (its server, and any server its path must leave) -> complete/fail.

Safety rules (SPEC section 2, and several servers):
- the lease is renewed before the item; a failed renewal is `lease_lost` and no MediaMTX call follows;
- every MediaMTX call needs the lease to outlive it by the local monotonic clock: before a call, the time
  since the last renewal plus the call deadline must stay within the lease. When it does not (the item
  waited for its server's lane behind another item's calls), the lease is renewed again first; a failed
  renewal, or one that itself took the margin (a process paused, e.g. SIGSTOP), is `lease_lost` without
  the call;
- an enabled device's path is ensured on its server (create, or replace when the managed config differs:
  read first, except after a change of its source URI, when it differs by construction and is replaced at
  once; a replace also creates a missing path); then, and for a disabled device, its path is deleted
  exactly (404 = done) on every other server it was placed on (a site move: created on the new server
  first, then deleted on the old one). No list-based or pattern deletes, ever;
- calls to one server go one at a time in this process (`ServerLanes`), so no call of ours races another
  on the same server: MediaMTX applies config changes one by one anyway, and a backoff can only come from a
  real failure;
- complete/fail are fenced writes (owner + token + unexpired lease); a rejected write is `lease_lost`;
- a MediaMTX answer that refuses the configuration for good (`is_refusal`: a 4xx but 401, 403, 404, 408,
  409, 425 and 429) makes the item `refused`: failed with MediaMTX's redacted reason and no next attempt
  until the device changes (retrying the same configuration would fail for ever);
- success of an enabled device refreshes `media_path_ownership` and enqueues PathOwnershipRecorded (key =
  path name, with the server id) in the same transaction as the completion.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TypeVar

from sense_reconciler.domain.model import DesiredState
from sense_reconciler.domain.reconcile import (
    ClaimedItem,
    PathAction,
    PathConfig,
    WorkItem,
    is_refusal,
    plan_ensure,
    retry_backoff_seconds,
)
from sense_reconciler.service_layer.metrics import ReconcileItemResult
from sense_reconciler.service_layer.ports import (
    MediaMtxPort,
    MediaServerFleet,
    SenseUnitOfWork,
    UnitOfWorkFactory,
)
from sense_reconciler.service_layer.source_uris import SourceUris
from yovision_platform.errors import LeaseLost
from yovision_platform.mediamtx import MediaMtxError
from yovision_platform.messaging import AvroSerde, OutboxMessage, build_event
from yovision_platform.observability import context_of, tracer
from yovision_platform.security import SecretUnreadable
from yovision_platform.storage import Lease

log = logging.getLogger(__name__)
_tracer = tracer(__name__)

T = TypeVar("T")
NOT_REGISTERED = "media_server_not_registered"
# MediaMTX answers 400 to an add of a path it has: the path exists (an earlier attempt, a stale read).
ADD_REFUSED = "mediamtx_http_400"


class ServerLanes:
    """One MediaMTX call at a time per server within this process."""

    def __init__(self, server_ids: Iterable[str]) -> None:
        self._locks = {server_id: asyncio.Lock() for server_id in server_ids}

    @contextlib.asynccontextmanager
    async def lane(self, server_id: str) -> AsyncIterator[None]:
        async with self._locks[server_id]:
            yield


class _LeaseClock:
    """The item's lease and when it was last renewed (monotonic), guarding each MediaMTX call: a call starts
    only while the lease outlives its deadline. When the wait for the server's lane (the calls of the item
    ahead) has used that margin up, the lease is renewed first (`renew`, fenced: `LeaseLost`, no call)."""

    def __init__(
        self,
        lease: Lease,
        lease_seconds: float,
        deadline_seconds: float,
        renew: Callable[[Lease], Awaitable[Lease]],
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lease = lease
        self._now = now
        self._renewed_at = now()
        self._lease_seconds = lease_seconds
        self._deadline = deadline_seconds
        self._renew = renew

    def renewed(self, lease: Lease) -> None:
        self.lease = lease
        self._renewed_at = self._now()

    def _fits(self) -> bool:
        return self._now() - self._renewed_at + self._deadline < self._lease_seconds

    async def call(self, operation: Callable[[], Awaitable[T]]) -> T:
        if not self._fits():
            requested = self._now()  # the new lease runs from no earlier than the request
            self.lease = await self._renew(self.lease)
            self._renewed_at = requested
            if not self._fits():  # the renewal itself took the margin (a paused process)
                raise LeaseLost()
        return await operation()


class ItemReconciler:
    def __init__(
        self,
        units: UnitOfWorkFactory,
        fleet: MediaServerFleet,
        lanes: ServerLanes,
        sources: SourceUris,
        serde: AvroSerde,
        *,
        lease_seconds: float,
        ownership_topic: str | None,
    ) -> None:
        self._units = units
        self._fleet = fleet
        self._lanes = lanes
        self._sources = sources
        self._serde = serde
        self._lease_seconds = lease_seconds
        self._ownership_topic = ownership_topic  # None: the catalogue's topic (sense.path-ownership.v1)

    async def process(self, item: ClaimedItem) -> ReconcileItemResult:
        try:
            async with self._units() as uow:
                work = await uow.reconcile.renew_and_load(item, lease_seconds=self._lease_seconds)
        except LeaseLost:
            log.info("lease lost before reconcile", extra={"partition": item.partition})
            return ReconcileItemResult.LEASE_LOST
        with _tracer.start_as_current_span(
            "reconcile",
            context=context_of(work.trace_parent),
            attributes={
                "yovision.device_id": str(work.device_id),
                "yovision.media_server_id": work.media_server_id,
                "yovision.desired_state": work.desired_state,
            },
        ) as span:
            result = await self._converge(item, work)
            span.set_attribute("yovision.outcome", result.value)
            return result

    async def _converge(self, item: ClaimedItem, work: WorkItem) -> ReconcileItemResult:
        clock = _LeaseClock(
            work.lease,
            self._lease_seconds,
            self._fleet.deadline_seconds,
            renew=lambda lease: self._renew(work, lease),
        )
        try:
            await self._apply(work, clock)
        except LeaseLost:
            log.info(
                "lease would expire during a MediaMTX call; skipped", extra={"partition": item.partition}
            )
            return ReconcileItemResult.LEASE_LOST
        except MediaMtxError as exc:
            if is_refusal(exc.status):
                return await self._refuse(item, work, clock.lease, exc)
            return await self.fail(item, clock.lease, exc.code)
        except SecretUnreadable as exc:
            return await self.fail(item, clock.lease, exc.code)
        try:
            async with self._units() as uow:
                await uow.reconcile.complete(work, clock.lease)
                if work.desired_state == DesiredState.ENABLED:
                    await self._record_ownership(uow, work)
        except LeaseLost:
            log.info("completion rejected: lease lost", extra={"partition": item.partition})
            return ReconcileItemResult.LEASE_LOST
        return ReconcileItemResult.CONVERGED

    async def _renew(self, work: WorkItem, lease: Lease) -> Lease:
        async with self._units() as uow:
            return await uow.reconcile.renew(work, lease, lease_seconds=self._lease_seconds)

    async def fail(self, item: ClaimedItem, lease: Lease, code: str) -> ReconcileItemResult:
        """Fenced: count the failure, keep the stable code, schedule the next attempt (persisted backoff)."""
        delay = retry_backoff_seconds(item.attempts + 1)
        try:
            async with self._units() as uow:
                await uow.reconcile.fail(item, lease, error_code=code, retry_in_seconds=delay)
        except LeaseLost:
            return ReconcileItemResult.LEASE_LOST
        log.warning("reconcile failed", extra={"error_code": code, "partition": item.partition})
        return ReconcileItemResult.FAILED

    async def _refuse(
        self, item: ClaimedItem, work: WorkItem, lease: Lease, refusal: MediaMtxError
    ) -> ReconcileItemResult:
        """Fenced: failed for good with MediaMTX's (redacted) reason; due again only after a change."""
        try:
            async with self._units() as uow:
                await uow.reconcile.refuse(work, lease, error_code=refusal.code, reason=refusal.reason)
        except LeaseLost:
            return ReconcileItemResult.LEASE_LOST
        log.warning(
            "MediaMTX refused the configuration: not retried until the device changes",
            extra={"error_code": refusal.code, "partition": item.partition},
        )
        return ReconcileItemResult.REFUSED

    async def _apply(self, work: WorkItem, clock: _LeaseClock) -> None:
        if work.desired_state == DesiredState.ENABLED:
            desired = PathConfig(self._sources.reveal(work.device_id, work.source))
            await self._ensure(work, desired, clock)
            leaving = work.placements - {work.media_server_id}
        else:
            leaving = work.placements or frozenset({work.media_server_id})
        for server in sorted(leaving):
            await self._delete_on(server, work.path_name, clock)
            if server in work.placements:
                async with self._units() as uow:
                    renewed = await uow.reconcile.drop_placement(
                        work, clock.lease, server, lease_seconds=self._lease_seconds
                    )
                clock.renewed(renewed)

    async def _delete_on(self, server: str, name: str, clock: _LeaseClock) -> None:
        client = self._fleet.client(server)
        async with self._lanes.lane(server):
            await clock.call(lambda: client.delete_path(name))

    async def _ensure(self, work: WorkItem, desired: PathConfig, clock: _LeaseClock) -> None:
        client = self._fleet.client(work.media_server_id)
        async with self._lanes.lane(work.media_server_id):
            if work.placed_now:  # Sense never configured it there: add at once, no read first
                await self._add_or_adopt(client, work.path_name, desired, clock)
                return
            if work.replace_due:  # MediaMTX has another source: replace at once, no read first
                await clock.call(lambda: client.replace_path(work.path_name, desired))
                return
            observed = await clock.call(lambda: client.get_path(work.path_name))
            action = plan_ensure(desired, observed)
            if action is PathAction.ADD:
                await self._add_or_adopt(client, work.path_name, desired, clock)
            elif action is PathAction.REPLACE:
                await clock.call(lambda: client.replace_path(work.path_name, desired))

    @staticmethod
    async def _add_or_adopt(client: MediaMtxPort, name: str, desired: PathConfig, clock: _LeaseClock) -> None:
        """Add the path; when MediaMTX refuses because it exists (a crash after an earlier add, or a read
        that saw MediaMTX's previous configuration), read it and replace it if its config differs."""
        try:
            await clock.call(lambda: client.add_path(name, desired))
        except MediaMtxError as exc:
            if exc.code != ADD_REFUSED:
                raise
            observed = await clock.call(lambda: client.get_path(name))
            if observed is None:
                raise
            if observed != desired:
                await clock.call(lambda: client.replace_path(name, desired))

    async def _record_ownership(self, uow: SenseUnitOfWork, work: WorkItem) -> None:
        seen = await uow.reconcile.record_ownership(work)
        payload = {
            "path_name": work.path_name,
            "media_server_id": work.media_server_id,
            "device_id": str(work.device_id),
            "tenant_id": work.tenant_id,
            "site_id": work.site_id,
            "first_seen_at": seen.first_seen_at,
            "last_seen_at": seen.last_seen_at,
        }
        event = build_event(
            self._serde, "PathOwnershipRecorded", work.path_name, payload, event_id=uuid.uuid4()
        )
        await uow.outbox.enqueue(OutboxMessage.from_event(event, topic=self._ownership_topic))
