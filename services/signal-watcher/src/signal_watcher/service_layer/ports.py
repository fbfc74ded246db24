"""The ports signal-watcher's use cases take: its stores inside one unit of work, and the probe client.

Each port has two adapters, proven equal by one contract suite in `tests/ports/signal_watcher/` run against
both: PostgreSQL (`adapters.repository`, `adapters.unit_of_work`) and HTTP (`adapters.probe_client`), and
the in-memory fakes of `adapters.memory`.

Times are the store's clock (PostgreSQL's `now()`, the start of the transaction): due-ness, leases, the
check-now spacing and retention never read the application's clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from signal_watcher.domain.model import Header, Status, WatcherSpec
from signal_watcher.domain.probes import ProbeResponse
from signal_watcher.domain.records import CheckRow, Position, WatcherAfterCheck, WatcherRecord
from signal_watcher.domain.ssrf import AddressGuard
from yovision_platform.storage import Lease, UnitOfWork

__all__ = [
    "CheckStore",
    "ClaimedWatcher",
    "Probe",
    "SignalUnitOfWork",
    "UnitOfWorkFactory",
    "WatcherStore",
]


@dataclass(frozen=True)
class ClaimedWatcher:
    """A due watcher leased for one check, as the claim read it (no second read before the probe): its
    secrets opened, or `record.secrets_error` when they cannot be."""

    watcher_id: uuid.UUID
    lease: Lease
    record: WatcherRecord


class WatcherStore(Protocol):
    """Watchers, their secrets (headers and body) encrypted at rest and bound to the watcher's id.

    Every user-facing method takes the caller's `user_id`: a watcher of another user is not found (None,
    False). Reading a watcher whose secrets cannot be decrypted raises `SecretsUnreadable` (its code is
    `secret_unreadable` or `secret_key_unknown`), except `claim_due`, which reports the code in the
    record's `secrets_error`.
    User edits (`update_spec`, `set_status`) clear the lease, so a check in flight loses it."""

    async def lock_user(self, user_id: str) -> None:
        """Serialize `user_id`'s creates until the unit of work ends (the per-user cap is counted under
        this lock)."""
        ...

    async def count_for_user(self, user_id: str) -> int: ...

    async def insert(self, user_id: str, spec: WatcherSpec) -> WatcherRecord:
        """A new ACTIVE watcher with a fresh id, due now, without a baseline."""
        ...

    async def get(self, user_id: str, watcher_id: uuid.UUID) -> WatcherRecord | None: ...

    async def list_for_user(
        self, user_id: str, *, limit: int, offset: int = 0, after: Position | None = None
    ) -> list[WatcherRecord]:
        """Oldest first by (created_at, id); `after`: rows strictly after that position (keyset); `offset`:
        rows skipped from there (from the first row without `after`), then at most `limit` rows."""
        ...

    async def list_all(
        self, *, limit: int, offset: int = 0, after: Position | None = None
    ) -> list[WatcherRecord]:
        """Every user's watchers, in the order of `list_for_user`."""
        ...

    async def update_spec(
        self, user_id: str, watcher_id: uuid.UUID, spec: WatcherSpec, *, reset_baseline: bool
    ) -> WatcherRecord | None:
        """Replace the definition; `reset_baseline` also forgets the judged value and the last change."""
        ...

    async def set_status(self, user_id: str, watcher_id: uuid.UUID, status: Status) -> WatcherRecord | None:
        """Re-enabling a DISABLED watcher resets its failures and baseline and makes it due now."""
        ...

    async def request_check(
        self, user_id: str, watcher_id: uuid.UUID, *, min_spacing_seconds: float
    ) -> WatcherRecord | None:
        """Make an ACTIVE watcher due now, unless its last check is less than `min_spacing_seconds` old.
        None when nothing changed: not the caller's, not active, or checked too recently."""
        ...

    async def delete(self, user_id: str, watcher_id: uuid.UUID) -> bool:
        """Delete the watcher and its check rows; False when the caller has no such watcher."""
        ...

    async def claim_due(self, owner: str, *, limit: int, lease_seconds: float) -> list[ClaimedWatcher]:
        """Lease up to `limit` ACTIVE watchers that are due and not leased (or whose lease expired),
        earliest `next_check_at` first (then id), each with its record (secrets opened as far as they can
        be: `secrets_error`)."""
        ...

    async def write_result(self, watcher_id: uuid.UUID, lease: Lease, after: WatcherAfterCheck) -> None:
        """Record a check's outcome and release the lease. Fenced: raises `LeaseLost` (and writes
        nothing) when the lease was lost or cleared by an edit."""
        ...


class CheckStore(Protocol):
    """The check log of every watcher (deleted with its watcher) and its retention."""

    async def insert(self, check: CheckRow) -> None: ...

    async def list_for_watcher(
        self, watcher_id: uuid.UUID, *, limit: int, offset: int = 0, before: Position | None = None
    ) -> list[CheckRow]:
        """Newest first by (checked_at, id); `before`: rows strictly before that position (keyset);
        `offset` and `limit` as in `WatcherStore.list_for_user`."""
        ...

    async def triggers_in_last_hour(self, watcher_id: uuid.UUID) -> int:
        """Checks of the watcher that triggered a run, checked within the last hour."""
        ...

    async def delete_expired(self, *, retention_days: int, batch: int) -> int:
        """Delete at most `batch` rows older than `retention_days`, oldest first; returns how many."""
        ...


class SignalUnitOfWork(UnitOfWork, Protocol):
    """One transaction over the watchers, their check log and the outbox."""

    @property
    def watchers(self) -> WatcherStore: ...

    @property
    def checks(self) -> CheckStore: ...

    async def now(self) -> datetime:
        """The store's clock for this unit of work (fixed for its duration, like PostgreSQL's now())."""
        ...


UnitOfWorkFactory = Callable[[], SignalUnitOfWork]


class Probe(Protocol):
    """The probe HTTP client: one request per probe, refused (`ProbeFailed`) unless the URL passes the
    rules and every address its host resolves to passes `guard`.

    `ProbeFailed.code`: url_refused (the URL breaks a rule), dns (no answer), ssrf_blocked (an address is
    not allowed), probe_network_confined (an address is outside the confinement), connect_refused,
    connect_failed, timeout, tls, redirect (3xx, never followed), too_large (over 1 MiB of body),
    protocol_error."""

    @property
    def guard(self) -> AddressGuard: ...

    async def preflight(self, url: str) -> None:
        """Create/update time: the URL rules (`UrlRefused`, `TargetForbidden`, `NetworkConfined`), then the
        host resolved now and every address checked (`ProbeFailed`: ssrf_blocked, probe_network_confined,
        dns, timeout)."""
        ...

    async def probe(
        self, method: str, url: str, headers: Sequence[Header], body: str | None
    ) -> ProbeResponse:
        """One request: the status and at most 1 MiB of body, or `ProbeFailed`."""
        ...
