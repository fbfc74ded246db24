"""In-memory fakes of the ports (service_layer.ports), for fast use-case tests. The contract suites in
tests/ports/signal_watcher/ run each of them against its real adapter, so they behave alike.

- `MemorySignalDatabase`: the fake database, its rows, clock and committed outbox; calling it opens a
  `MemorySignalUnitOfWork` over `MemoryWatcherStore` and `MemoryCheckStore`. Secrets are kept only as
  ciphertexts of the same `SecretCipher` the PostgreSQL adapter uses, so a key missing from the ring or a
  damaged value is refused exactly as there. Its clock is PostgreSQL's now(): fixed within a unit of
  work, later in the next one.
- `MemoryProbe`: the probe client over a table of host names and the answers of URLs; the same URL rules,
  address guard and failure codes as `ProbeClient`, without a socket.

Fakes are single-process and serial (`MemoryUnitOfWork`): they model one transaction at a time, so the
per-user lock is a no-op here and its proof stays on PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Self

from signal_watcher.adapters.crypto import SealedSecrets, SecretCipher
from signal_watcher.adapters.probe_client import MAX_BODY_BYTES, GuardedNetworkBackend, probe_target
from signal_watcher.domain.model import Header, Status, WatcherSpec
from signal_watcher.domain.probes import ProbeFailed, ProbeResponse
from signal_watcher.domain.records import CheckRow, Position, WatcherAfterCheck, WatcherRecord
from signal_watcher.domain.ssrf import STRICT_GUARD, AddressGuard, IpAddress, ProbeTarget, check_url
from signal_watcher.service_layer.ports import ClaimedWatcher
from yovision_platform.errors import LeaseLost
from yovision_platform.messaging import OutboxMessage
from yovision_platform.storage import MAX_CLAIM_BATCH, Lease, MemoryUnitOfWork

__all__ = [
    "MemoryCheckStore",
    "MemoryClock",
    "MemoryProbe",
    "MemorySignalDatabase",
    "MemorySignalUnitOfWork",
    "MemoryWatcherStore",
]


TRANSACTION_TICK = timedelta(microseconds=1)


class MemoryClock:
    """The fake database's clock (PostgreSQL's now(): the start of the transaction). It stands still within
    a unit of work, each unit of work starts one microsecond after the one before, and it moves further only
    when told to (`advance`)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime.now(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)

    def tick(self) -> None:
        self._now += TRANSACTION_TICK


@dataclass(frozen=True)
class _StoredWatcher:
    record: WatcherRecord  # its spec without secrets: those are only in `secrets`, sealed
    secrets: SealedSecrets
    lease: Lease | None = None


class MemoryWatcherTables:
    """The rows of the fake database; the unit of work snapshots them and restores them on rollback."""

    def __init__(self) -> None:
        self.watchers: dict[uuid.UUID, _StoredWatcher] = {}
        self.checks: dict[uuid.UUID, CheckRow] = {}


class MemoryWatcherStore:
    def __init__(self, tables: MemoryWatcherTables, cipher: SecretCipher, clock: MemoryClock) -> None:
        self._tables = tables
        self._cipher = cipher
        self._clock = clock

    def _record(self, stored: _StoredWatcher, *, tolerate_unreadable: bool = False) -> WatcherRecord:
        record, sealed = stored.record, stored.secrets
        secrets = self._cipher.open(
            record.id, sealed.headers, sealed.body, tolerate_unreadable=tolerate_unreadable
        )
        spec = dataclasses.replace(record.spec, headers=secrets.headers, body=secrets.body)
        return dataclasses.replace(record, spec=spec, secrets_error=secrets.error)

    def _owned(self, user_id: str, watcher_id: uuid.UUID) -> _StoredWatcher | None:
        stored = self._tables.watchers.get(watcher_id)
        return stored if stored is not None and stored.record.user_id == user_id else None

    def _save(self, stored: _StoredWatcher) -> WatcherRecord:
        self._tables.watchers[stored.record.id] = stored
        return self._record(stored)

    def _sealed(self, watcher_id: uuid.UUID, spec: WatcherSpec) -> tuple[WatcherSpec, SealedSecrets]:
        return (
            dataclasses.replace(spec, headers=(), body=None),
            self._cipher.seal(watcher_id, spec.headers, spec.body),
        )

    def _sorted(self, user_id: str | None, after: Position | None) -> list[_StoredWatcher]:
        rows = [
            stored
            for stored in self._tables.watchers.values()
            if user_id is None or stored.record.user_id == user_id
        ]
        rows.sort(key=lambda stored: (stored.record.created_at, stored.record.id))
        if after is not None:
            rows = [stored for stored in rows if (stored.record.created_at, stored.record.id) > after]
        return rows

    async def lock_user(self, user_id: str) -> None:
        return None  # serial by design (see the module docstring)

    async def count_for_user(self, user_id: str) -> int:
        return sum(1 for stored in self._tables.watchers.values() if stored.record.user_id == user_id)

    async def insert(self, user_id: str, spec: WatcherSpec) -> WatcherRecord:
        watcher_id, now = uuid.uuid4(), self._clock.now()
        bare, sealed = self._sealed(watcher_id, spec)
        record = WatcherRecord(
            id=watcher_id, user_id=user_id, spec=bare, status=Status.ACTIVE,
            last_value_hash=None, last_value_excerpt=None, last_checked_at=None, last_changed_at=None,
            consecutive_failures=0, next_check_at=now, created_at=now, updated_at=now,
        )  # fmt: skip
        return self._save(_StoredWatcher(record, sealed))

    async def get(self, user_id: str, watcher_id: uuid.UUID) -> WatcherRecord | None:
        stored = self._owned(user_id, watcher_id)
        return None if stored is None else self._record(stored)

    async def list_for_user(
        self, user_id: str, *, limit: int, offset: int = 0, after: Position | None = None
    ) -> list[WatcherRecord]:
        return [self._record(s) for s in self._sorted(user_id, after)[offset : offset + limit]]

    async def list_all(
        self, *, limit: int, offset: int = 0, after: Position | None = None
    ) -> list[WatcherRecord]:
        return [self._record(s) for s in self._sorted(None, after)[offset : offset + limit]]

    async def update_spec(
        self, user_id: str, watcher_id: uuid.UUID, spec: WatcherSpec, *, reset_baseline: bool
    ) -> WatcherRecord | None:
        stored = self._owned(user_id, watcher_id)
        if stored is None:
            return None
        bare, sealed = self._sealed(watcher_id, spec)
        record = dataclasses.replace(stored.record, spec=bare, updated_at=self._clock.now())
        # a user edit clears the lease (a check in flight loses it), as in the PostgreSQL adapter
        if reset_baseline:
            record = dataclasses.replace(
                record, last_value_hash=None, last_value_excerpt=None, last_changed_at=None
            )
        return self._save(_StoredWatcher(record, sealed))

    async def set_status(self, user_id: str, watcher_id: uuid.UUID, status: Status) -> WatcherRecord | None:
        stored = self._owned(user_id, watcher_id)
        if stored is None:
            return None
        now = self._clock.now()
        record = dataclasses.replace(stored.record, status=status, updated_at=now)
        if stored.record.status is Status.DISABLED and status is Status.ACTIVE:
            record = dataclasses.replace(
                record,
                consecutive_failures=0,
                last_value_hash=None,
                last_value_excerpt=None,
                last_changed_at=None,
                next_check_at=now,
            )
        return self._save(_StoredWatcher(record, stored.secrets))

    async def request_check(
        self, user_id: str, watcher_id: uuid.UUID, *, min_spacing_seconds: float
    ) -> WatcherRecord | None:
        stored = self._owned(user_id, watcher_id)
        now = self._clock.now()
        if stored is None or stored.record.status is not Status.ACTIVE:
            return None
        last = stored.record.last_checked_at
        if last is not None and last > now - timedelta(seconds=min_spacing_seconds):
            return None
        record = dataclasses.replace(
            stored.record, next_check_at=min(stored.record.next_check_at, now), updated_at=now
        )
        return self._save(dataclasses.replace(stored, record=record))

    async def delete(self, user_id: str, watcher_id: uuid.UUID) -> bool:
        if self._owned(user_id, watcher_id) is None:
            return False
        del self._tables.watchers[watcher_id]
        for check_id in [c.id for c in self._tables.checks.values() if c.watcher_id == watcher_id]:
            del self._tables.checks[check_id]  # ON DELETE CASCADE
        return True

    def _lease_is_current(self, stored: _StoredWatcher | None, lease: Lease) -> bool:
        held = None if stored is None else stored.lease
        return (
            held is not None
            and (held.owner, held.token) == (lease.owner, lease.token)
            and held.expires_at > self._clock.now()
        )

    async def claim_due(self, owner: str, *, limit: int, lease_seconds: float) -> list[ClaimedWatcher]:
        if not 1 <= limit <= MAX_CLAIM_BATCH:
            raise ValueError(f"claim limit must be within 1..{MAX_CLAIM_BATCH}")
        now = self._clock.now()
        due = sorted(
            (
                stored
                for stored in self._tables.watchers.values()
                if stored.record.status is Status.ACTIVE
                and stored.record.next_check_at <= now
                and (stored.lease is None or stored.lease.expires_at <= now)
            ),
            key=lambda stored: (stored.record.next_check_at, stored.record.id),
        )[:limit]
        claimed = []
        for stored in due:
            lease = Lease(owner, uuid.uuid4(), now + timedelta(seconds=lease_seconds))
            self._tables.watchers[stored.record.id] = dataclasses.replace(stored, lease=lease)
            record = self._record(stored, tolerate_unreadable=True)
            claimed.append(ClaimedWatcher(stored.record.id, lease, record))
        return claimed

    async def write_result(self, watcher_id: uuid.UUID, lease: Lease, after: WatcherAfterCheck) -> None:
        stored = self._tables.watchers.get(watcher_id)
        if stored is None or not self._lease_is_current(stored, lease):
            raise LeaseLost()
        record = dataclasses.replace(
            stored.record,
            status=after.status,
            consecutive_failures=after.consecutive_failures,
            last_checked_at=after.checked_at,
            next_check_at=after.next_check_at,
            last_value_hash=after.last_value_hash,
            last_value_excerpt=after.last_value_excerpt,
            last_changed_at=after.checked_at if after.changed else stored.record.last_changed_at,
        )
        self._tables.watchers[watcher_id] = _StoredWatcher(record, stored.secrets, lease=None)


class MemoryCheckStore:
    def __init__(self, tables: MemoryWatcherTables, clock: MemoryClock) -> None:
        self._tables = tables
        self._clock = clock

    async def insert(self, check: CheckRow) -> None:
        self._tables.checks[check.id] = check

    async def list_for_watcher(
        self, watcher_id: uuid.UUID, *, limit: int, offset: int = 0, before: Position | None = None
    ) -> list[CheckRow]:
        rows = sorted(
            (c for c in self._tables.checks.values() if c.watcher_id == watcher_id),
            key=lambda c: (c.checked_at, c.id),
            reverse=True,
        )
        if before is not None:
            rows = [c for c in rows if (c.checked_at, c.id) < before]
        return rows[offset : offset + limit]

    async def triggers_in_last_hour(self, watcher_id: uuid.UUID) -> int:
        since = self._clock.now() - timedelta(hours=1)
        return sum(
            1
            for c in self._tables.checks.values()
            if c.watcher_id == watcher_id and c.trigger_id is not None and c.checked_at > since
        )

    async def delete_expired(self, *, retention_days: int, batch: int) -> int:
        cutoff = self._clock.now() - timedelta(days=retention_days)
        expired = sorted(
            (c for c in self._tables.checks.values() if c.checked_at < cutoff), key=lambda c: c.checked_at
        )
        for check in expired[:batch]:
            del self._tables.checks[check.id]
        return len(expired[:batch])


class MemorySignalUnitOfWork(MemoryUnitOfWork):
    def __init__(self, database: MemorySignalDatabase) -> None:
        super().__init__()
        self.outbox.committed = database.committed  # what commits is kept by the database
        self._tables = database.tables
        self._clock = database.clock
        self.watchers = MemoryWatcherStore(database.tables, database.cipher, database.clock)
        self.checks = MemoryCheckStore(database.tables, database.clock)

    def stores(self) -> Sequence[object]:
        return (self._tables,)

    async def __aenter__(self) -> Self:
        self._clock.tick()
        return await super().__aenter__()

    async def now(self) -> datetime:
        return self._clock.now()


class MemorySignalDatabase:
    """The fake database: one set of rows, one clock and one committed outbox for every unit of work it
    opens (call it: it is a `UnitOfWorkFactory`)."""

    def __init__(self, cipher: SecretCipher, clock: MemoryClock | None = None) -> None:
        self.cipher = cipher
        self.clock = clock or MemoryClock()
        self.tables = MemoryWatcherTables()
        self.committed: list[OutboxMessage] = []

    def __call__(self) -> MemorySignalUnitOfWork:
        return MemorySignalUnitOfWork(self)

    def reading_with(self, cipher: SecretCipher) -> MemorySignalDatabase:
        """The same rows, clock and outbox, read and written with another key ring (another process's)."""
        other = MemorySignalDatabase(cipher, self.clock)
        other.tables, other.committed = self.tables, self.committed
        return other


@dataclass(frozen=True)
class _Answer:
    status: int = 200
    body: bytes = b""
    failure: str | None = None  # a transport failure code instead of a response
    echo: bool = False  # answer with the request (method, lower-cased headers, body) as JSON


class MemoryProbe:
    """The fake probe client. `names` maps host names to the addresses they resolve to (any other name
    does not resolve); a URL answers what `answer`, `fail` or `echo` set, and nothing listens elsewhere
    (`connect_refused`). `requests` counts the requests that reached a URL."""

    def __init__(
        self, *, guard: AddressGuard = STRICT_GUARD, names: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        self._guard = guard
        self._names = {
            host: [ipaddress.ip_address(a) for a in addresses] for host, addresses in (names or {}).items()
        }
        self._backend = GuardedNetworkBackend(self._resolve, guard)
        self._answers: dict[str, _Answer] = {}
        self.requests: Counter[str] = Counter()

    @property
    def guard(self) -> AddressGuard:
        return self._guard

    def answer(self, url: str, *, status: int = 200, body: bytes = b"") -> None:
        self._answers[url] = _Answer(status, body)

    def fail(self, url: str, code: str) -> None:
        self._answers[url] = _Answer(failure=code)

    def echo(self, url: str) -> None:
        self._answers[url] = _Answer(echo=True)

    async def _resolve(self, host: str, port: int) -> list[IpAddress]:
        if host not in self._names:
            raise OSError("no such name")
        return list(self._names[host])

    async def _resolve_checked(self, target: ProbeTarget) -> None:
        await self._backend.resolve_checked(target.host, target.port, None)

    async def preflight(self, url: str) -> None:
        await self._resolve_checked(check_url(url, self._guard))

    async def probe(
        self, method: str, url: str, headers: Sequence[Header], body: str | None
    ) -> ProbeResponse:
        await self._resolve_checked(probe_target(url, self._guard))  # as the real one does at connect time
        answer = self._answers.get(url)
        if answer is None:
            raise ProbeFailed("connect_refused")
        self.requests[url] += 1
        if answer.failure is not None:
            raise ProbeFailed(answer.failure)
        if answer.echo:
            return ProbeResponse(200, _echo(method, headers, body), 0)
        if 300 <= answer.status < 400:
            raise ProbeFailed("redirect")
        if len(answer.body) > MAX_BODY_BYTES:
            raise ProbeFailed("too_large")
        return ProbeResponse(answer.status, answer.body, 0)


def _echo(method: str, headers: Sequence[Header], body: str | None) -> bytes:
    document = {"method": method, "headers": {h.key.lower(): h.value for h in headers}, "body": body or ""}
    return json.dumps(document).encode()
