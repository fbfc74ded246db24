"""The user's watchers: create (under the per-user cap), read, list, update, delete, pause/resume, check
now, test now, and test a definition before it is saved. One use case per API operation, on the ports;
every one refuses with a `ServiceError` of `domain.errors` and never returns another user's watcher
(`WatcherNotFound`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from signal_watcher.domain.errors import (
    CHECK_NOW_MIN_SPACING_SECONDS,
    CheckTooSoon,
    LimitReached,
    NetworkConfined,
    NotActive,
    StoredBodyNeedsPost,
    TargetForbidden,
    WatcherNotFound,
)
from signal_watcher.domain.masking import unmask_headers
from signal_watcher.domain.model import Method, Status, WatcherSpec, resets_baseline
from signal_watcher.domain.probes import ProbeFailed
from signal_watcher.domain.records import CheckRow, Position, WatcherRecord
from signal_watcher.service_layer.checks import ProbeResult, probe_and_judge
from signal_watcher.service_layer.ports import Probe, SignalUnitOfWork, UnitOfWorkFactory
from yovision_platform.web import KeysetPage

__all__ = ["Preview", "Watchers"]

T = TypeVar("T")


@dataclass(frozen=True)
class Preview:
    """A test-now result: nothing written, nothing published."""

    result: ProbeResult
    would_change: bool
    is_baseline: bool

    @classmethod
    def of(cls, result: ProbeResult, baseline_hash: str | None) -> Preview:
        """`baseline_hash`: the judged value a check would compare with (None: it would record it)."""
        judged = result.judged
        return cls(
            result,
            would_change=bool(judged and baseline_hash and judged.value_hash != baseline_hash),
            is_baseline=bool(judged and baseline_hash is None),
        )


def _created(record: WatcherRecord) -> Position:
    return (record.created_at, record.id)


def _checked(row: CheckRow) -> Position:
    return (row.checked_at, row.id)


class Watchers:
    def __init__(
        self,
        units_of_work: UnitOfWorkFactory,
        probe: Probe,
        *,
        max_watchers_per_user: int,
        check_requested: Callable[[], None] = lambda: None,  # wakes this instance's scheduler
    ) -> None:
        self._units_of_work = units_of_work
        self._probe = probe
        self._max_per_user = max_watchers_per_user
        self._check_requested = check_requested

    async def create(self, user_id: str, sent: WatcherSpec) -> WatcherRecord:
        """`sent`: the definition as the user sent it (validated here)."""
        spec = self._validated(sent)
        await self._preflight(spec.url)
        async with self._units_of_work() as uow:
            await uow.watchers.lock_user(user_id)
            if await uow.watchers.count_for_user(user_id) >= self._max_per_user:
                raise LimitReached()
            return await uow.watchers.insert(user_id, spec)

    async def get(self, user_id: str, watcher_id: uuid.UUID) -> WatcherRecord:
        async with self._units_of_work() as uow:
            return await _owned(uow, user_id, watcher_id)

    async def list_own(
        self, user_id: str, *, limit: int, offset: int, after: Position | None
    ) -> KeysetPage[WatcherRecord, Position]:
        async with self._units_of_work() as uow:
            rows = await uow.watchers.list_for_user(user_id, limit=limit + 1, offset=offset, after=after)
        return KeysetPage.of(rows, limit, _created)

    async def list_all(
        self, *, limit: int, offset: int, after: Position | None
    ) -> KeysetPage[WatcherRecord, Position]:
        """Every user's watchers (the admin list; the caller's permission is checked by the route)."""
        async with self._units_of_work() as uow:
            rows = await uow.watchers.list_all(limit=limit + 1, offset=offset, after=after)
        return KeysetPage.of(rows, limit, _created)

    async def update(
        self, user_id: str, watcher_id: uuid.UUID, sent: WatcherSpec, *, body_sent: bool
    ) -> WatcherRecord:
        """Replace the definition with `sent`, in which sensitive headers sent back masked keep their
        stored values and, when the request left `body` out (`body_sent` False), the body is the stored
        one. The URL is resolved again (outside the transaction) only when it changed; the baseline resets
        when a probe or judging field differs from the definition stored at the moment of the write."""
        async with self._units_of_work() as uow:
            previous = (await _owned(uow, user_id, watcher_id)).spec
        spec = self._edited(previous, sent, body_sent=body_sent)
        if spec.url != previous.url:
            await self._preflight(spec.url)
        async with self._units_of_work() as uow:
            current = await _owned(uow, user_id, watcher_id)
            reset = resets_baseline(current.spec, spec)
            record = await uow.watchers.update_spec(user_id, watcher_id, spec, reset_baseline=reset)
        if record is None:
            raise WatcherNotFound()
        return record

    async def delete(self, user_id: str, watcher_id: uuid.UUID) -> None:
        async with self._units_of_work() as uow:
            if not await uow.watchers.delete(user_id, watcher_id):
                raise WatcherNotFound()

    async def set_status(self, user_id: str, watcher_id: uuid.UUID, status: Status) -> WatcherRecord:
        async with self._units_of_work() as uow:
            record = await uow.watchers.set_status(user_id, watcher_id, status)
        if record is None:
            raise WatcherNotFound()
        return record

    async def request_check(self, user_id: str, watcher_id: uuid.UUID) -> WatcherRecord:
        """A real check as soon as possible (recorded, may trigger, counts failures), like a due one: it
        overrides the interval and a failure backoff, at most one per watcher every
        CHECK_NOW_MIN_SPACING_SECONDS, so the API cannot be used to hammer a target."""
        async with self._units_of_work() as uow:
            record = await uow.watchers.request_check(
                user_id, watcher_id, min_spacing_seconds=CHECK_NOW_MIN_SPACING_SECONDS
            )
            if record is None:
                current = await _owned(uow, user_id, watcher_id)
                raise NotActive() if current.status is not Status.ACTIVE else CheckTooSoon()
        self._check_requested()
        return record

    async def preview(self, user_id: str, watcher_id: uuid.UUID) -> Preview:
        """Test now: probe and judge the stored watcher once, against its baseline."""
        async with self._units_of_work() as uow:
            record = await _owned(uow, user_id, watcher_id)
        return Preview.of(await probe_and_judge(self._probe, record.spec), record.last_value_hash)

    async def preview_definition(
        self, user_id: str, sent: WatcherSpec, *, edit_of: uuid.UUID | None = None, body_sent: bool = True
    ) -> Preview:
        """Test a definition before it is saved: refused as `create` would refuse it (validation, the SSRF
        guard and the confinement, the name resolved now), then probed and judged once exactly as test now
        does. Nothing is written or published. A new definition has no baseline (a first check would record
        it). With `edit_of` (one of the caller's watchers) it is tested as that watcher's update would save
        it: masked sensitive headers and, unless `body_sent`, the body are the stored ones, and it is judged
        against the stored baseline unless the edit resets it."""
        baseline: str | None = None
        if edit_of is None:
            spec = self._validated(sent)
        else:
            async with self._units_of_work() as uow:
                stored = await _owned(uow, user_id, edit_of)
            spec = self._edited(stored.spec, sent, body_sent=body_sent)
            baseline = None if resets_baseline(stored.spec, spec) else stored.last_value_hash
        await self._preflight(spec.url)
        return Preview.of(await probe_and_judge(self._probe, spec), baseline)

    async def list_checks(
        self, user_id: str, watcher_id: uuid.UUID, *, limit: int, offset: int, before: Position | None
    ) -> KeysetPage[CheckRow, Position]:
        async with self._units_of_work() as uow:
            await _owned(uow, user_id, watcher_id)
            rows = await uow.checks.list_for_watcher(
                watcher_id, limit=limit + 1, offset=offset, before=before
            )
        return KeysetPage.of(rows, limit, _checked)

    def _edited(self, previous: WatcherSpec, sent: WatcherSpec, *, body_sent: bool) -> WatcherSpec:
        """`sent` as an update of `previous` saves it: masked sensitive headers keep their stored values and,
        unless `body_sent`, the stored body stays (only with POST: else `StoredBodyNeedsPost`); validated."""
        if not body_sent and previous.body is not None and sent.method is not Method.POST:
            raise StoredBodyNeedsPost()
        kept = replace(sent, headers=unmask_headers(sent.headers, previous.headers))
        return self._validated(kept if body_sent else replace(kept, body=previous.body))

    def _validated(self, spec: WatcherSpec) -> WatcherSpec:
        """The definition checked with the probe's guard, its interval clamped and its URL stripped."""
        return replace(spec, url=spec.url.strip()).validated(self._probe.guard)

    async def _preflight(self, url: str) -> None:
        """Refuse a name that resolves to a blocked address, or one outside the confinement, now; a name that
        does not resolve yet is allowed (its probes fail with `dns`), and every probe checks again at connect
        time."""
        try:
            await self._probe.preflight(url)
        except ProbeFailed as exc:
            if exc.code == "ssrf_blocked":
                raise TargetForbidden("ssrf_blocked_address") from None
            if exc.code == NetworkConfined.code:
                raise NetworkConfined() from None


async def _owned(uow: SignalUnitOfWork, user_id: str, watcher_id: uuid.UUID) -> WatcherRecord:
    record = await uow.watchers.get(user_id, watcher_id)
    if record is None:
        raise WatcherNotFound()
    return record
