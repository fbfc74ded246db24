"""In-memory fakes of media-worker's ports, for use-case tests that run in milliseconds.

`tests/ports/media_worker/` proves each of them equal to its real adapter. They model one process and one
transaction at a time (no store method suspends, so a unit of work is never interleaved with another):
row locks, advisory locks held by dead sessions and concurrent transactions stay proven on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import posixpath
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Self

from media_worker.domain.errors import InvalidUpload
from media_worker.domain.keys import OUTPUTS_FOLDER, WORK_FOLDER, canonical_uuid, work_folder_token
from media_worker.domain.limits import PROTECTION_WINDOW
from media_worker.domain.material import Material, MaterialStatus, NewMaterial
from media_worker.domain.outputs import Aborted, Output, TranscodeFailure
from media_worker.domain.sessions import SessionState, UploadSession
from media_worker.service_layer.ports import (
    AttemptFolder,
    ChunkTarget,
    ClaimedJob,
    HeldLease,
    InstanceRecord,
    StoredFile,
)
from yovision_platform.errors import LeaseLost
from yovision_platform.messaging import OutboxMessage
from yovision_platform.storage import Lease, MemoryOutbox, MemoryUnitOfWork

__all__ = [
    "Clock",
    "ManualClock",
    "MemoryCapability",
    "MemoryLocks",
    "MemoryMedia",
    "MemoryMediaTools",
    "MemoryMediaUnitOfWork",
    "MemoryStorage",
    "StrictClock",
]

Clock = Callable[[], datetime]
PLENTY_FREE_BYTES = 1 << 50
STORAGE_ROOT = Path("/in-memory-storage")  # never touched: paths name entries of `MemoryStorage.files`


def utc_now() -> datetime:
    return datetime.now(UTC)


class StrictClock:
    """The wall clock, but every reading later than the one before (as every later transaction's `now()`
    in PostgreSQL): the default clock of `MemoryMedia`."""

    def __init__(self) -> None:
        self._last = datetime.min.replace(tzinfo=UTC)

    def __call__(self) -> datetime:
        self._last = max(utc_now(), self._last + timedelta(microseconds=1))
        return self._last


@dataclass
class ManualClock:
    """A clock that moves only when told to (`advance`)."""

    now: datetime = field(default_factory=utc_now)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


# --- the fake database ----------------------------------------------------------------------------------


@dataclass
class _MaterialRow:
    new: NewMaterial
    created_at: datetime
    status: MaterialStatus = MaterialStatus.PENDING
    progress: int = 0
    error_code: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class _SessionRow:
    session: UploadSession
    merge_started_at: datetime | None = None


@dataclass
class _JobRow:
    job_id: uuid.UUID
    material_id: uuid.UUID
    created_at: datetime
    state: str = "pending"
    attempt: int = 0
    error_code: str | None = None
    lease: Lease | None = None
    trace_parent: str | None = None


@dataclass
class _InstanceRow:
    instance_id: str
    started_at: datetime
    seen_at: datetime
    draining: bool = False


@dataclass
class MemoryMediaTables:
    """Every row of the fake database: the one object a unit of work snapshots and restores."""

    materials: dict[uuid.UUID, _MaterialRow] = field(default_factory=dict)
    sessions: dict[uuid.UUID, _SessionRow] = field(default_factory=dict)
    jobs: dict[uuid.UUID, _JobRow] = field(default_factory=dict)
    instances: dict[str, _InstanceRow] = field(default_factory=dict)


def _material_of(row: _MaterialRow, read_at: datetime) -> Material:
    recorded = {f.name: getattr(row.new, f.name) for f in fields(NewMaterial)}
    return Material(
        **recorded,
        status=row.status,
        progress=row.progress,
        error_code=row.error_code,
        outputs=dict(row.outputs),
        created_at=row.created_at,
        protection_until=row.created_at + PROTECTION_WINDOW,
        read_at=read_at,
    )


class _Rows:
    """A store on the fake tables; `clock` is its unit of work's transaction time (as `now()`)."""

    def __init__(self, tables: MemoryMediaTables, clock: Clock) -> None:
        self._tables = tables
        self._clock = clock


class MemoryMaterials(_Rows):
    def _row(self, material_id: uuid.UUID) -> _MaterialRow:
        row = self._tables.materials.get(material_id)
        assert row is not None, "no such material"
        return row

    async def add(self, material: NewMaterial) -> None:
        if material.material_id in self._tables.materials:
            raise ValueError("duplicate material id")
        self._tables.materials[material.material_id] = _MaterialRow(material, self._clock())

    async def get(self, material_id: uuid.UUID, owner: str) -> Material | None:
        row = self._tables.materials.get(material_id)
        if row is None or row.new.owner != owner:
            return None
        return _material_of(row, self._clock())

    async def lock(self, material_id: uuid.UUID) -> Material:
        return _material_of(self._row(material_id), self._clock())

    async def set_processing(self, material_id: uuid.UUID) -> Material:
        row = self._row(material_id)
        row.status, row.progress, row.error_code = MaterialStatus.PROCESSING, 0, None
        return _material_of(row, self._clock())

    async def raise_progress(self, material_id: uuid.UUID, progress: int) -> None:
        row = self._tables.materials.get(material_id)
        if row is not None and row.status == MaterialStatus.PROCESSING:
            row.progress = max(row.progress, progress)

    async def complete(self, material_id: uuid.UUID, outputs: Mapping[str, str]) -> None:
        row = self._row(material_id)
        row.status, row.progress, row.error_code = MaterialStatus.DONE, 100, None
        row.outputs = {**outputs, **row.outputs}

    async def fail(self, material_id: uuid.UUID, error_code: str) -> None:
        row = self._row(material_id)
        row.status, row.error_code = MaterialStatus.FAILED, error_code

    async def back_to_pending(self, material_id: uuid.UUID) -> None:
        row = self._tables.materials.get(material_id)
        if row is not None and row.status == MaterialStatus.PROCESSING:
            row.status = MaterialStatus.PENDING

    async def reset_failed(self, material_id: uuid.UUID, owner: str) -> bool:
        row = self._tables.materials.get(material_id)
        if row is None or row.new.owner != owner or row.status != MaterialStatus.FAILED:
            return False
        row.status, row.progress, row.error_code = MaterialStatus.PENDING, 0, None
        return True


class MemorySessions(_Rows):
    async def find(self, owner: str, upload_key: str) -> UploadSession | None:
        for row in self._tables.sessions.values():
            if (row.session.owner, row.session.upload_key) == (owner, upload_key):
                return row.session
        return None

    async def get(self, session_id: uuid.UUID, owner: str) -> UploadSession | None:
        row = self._tables.sessions.get(session_id)
        return row.session if row is not None and row.session.owner == owner else None

    async def add(self, session: UploadSession) -> UploadSession | None:
        if await self.find(session.owner, session.upload_key) is not None:
            return None
        if session.session_id in self._tables.sessions or any(
            row.session.material_id == session.material_id for row in self._tables.sessions.values()
        ):
            raise ValueError("duplicate session or material id")
        stored = replace(session, received=frozenset(), state=SessionState.OPEN)
        self._tables.sessions[session.session_id] = _SessionRow(stored)
        return stored

    async def add_received(self, session_id: uuid.UUID, index: int) -> None:
        row = self._tables.sessions.get(session_id)
        if row is not None and row.session.state == SessionState.OPEN:
            row.session = row.session.with_chunk(index)

    async def begin_merge(
        self, session_id: uuid.UUID, owner: str, instance_id: str, stale_seconds: float
    ) -> UploadSession | None:
        row = self._tables.sessions.get(session_id)
        if row is None or row.session.owner != owner:
            return None
        now = self._clock()
        state = row.session.state
        abandoned = (
            state == SessionState.MERGING
            and row.merge_started_at is not None
            and row.merge_started_at < now - timedelta(seconds=stale_seconds)
        )
        if state != SessionState.OPEN and not abandoned:
            return None
        row.session = replace(row.session, state=SessionState.MERGING)
        row.merge_started_at = now
        return row.session

    async def finish_merge(self, session_id: uuid.UUID, merged_key: str) -> None:
        row = self._tables.sessions.get(session_id)
        if row is not None and row.session.state == SessionState.MERGING:
            row.session = replace(row.session, state=SessionState.COMPLETED)

    async def abort_merge(self, session_id: uuid.UUID) -> None:
        row = self._tables.sessions.get(session_id)
        if row is not None and row.session.state == SessionState.MERGING:
            row.session = replace(row.session, state=SessionState.OPEN)
            row.merge_started_at = None


class MemoryJobs(_Rows):
    def _current(self, job_id: uuid.UUID, lease: Lease) -> _JobRow:
        """The job, if `lease` is still its current lease by the clock; LeaseLost otherwise."""
        row = self._tables.jobs.get(job_id)
        held = row.lease if row is not None else None
        if row is None or held is None or (held.owner, held.token) != (lease.owner, lease.token):
            raise LeaseLost()
        if held.expires_at <= self._clock():
            raise LeaseLost()
        return row

    async def add(self, material_id: uuid.UUID, *, trace_parent: str | None = None) -> uuid.UUID:
        if material_id not in self._tables.materials:
            raise ValueError("no such material")
        if any(row.material_id == material_id for row in self._tables.jobs.values()):
            raise ValueError("the material has a job")
        job_id = uuid.uuid4()
        self._tables.jobs[job_id] = _JobRow(job_id, material_id, self._clock(), trace_parent=trace_parent)
        return job_id

    async def claim(self, owner: str, lease_seconds: float) -> ClaimedJob | None:
        now = self._clock()
        due = [
            row
            for row in self._tables.jobs.values()
            if row.state in ("pending", "running") and (row.lease is None or row.lease.expires_at <= now)
        ]
        if not due:
            return None
        row = min(due, key=lambda r: r.created_at)
        row.lease = Lease(owner, uuid.uuid4(), now + timedelta(seconds=lease_seconds))
        return ClaimedJob(row.job_id, row.material_id, row.lease, row.trace_parent)

    async def start(self, job_id: uuid.UUID, lease: Lease) -> int:
        row = self._current(job_id, lease)
        row.state = "running"
        row.attempt += 1
        return row.attempt

    async def renew(self, job_id: uuid.UUID, lease: Lease, lease_seconds: float) -> None:
        row = self._current(job_id, lease)
        row.lease = replace(lease, expires_at=self._clock() + timedelta(seconds=lease_seconds))

    async def finish(
        self, job_id: uuid.UUID, lease: Lease, *, state: str, error_code: str | None = None
    ) -> None:
        row = self._current(job_id, lease)
        row.state, row.error_code, row.lease = state, error_code, None

    async def release(self, job_id: uuid.UUID, lease: Lease) -> None:
        row = self._current(job_id, lease)
        row.state, row.lease = "pending", None

    async def reset_failed(self, material_id: uuid.UUID) -> None:
        for row in self._tables.jobs.values():
            if row.material_id == material_id and row.state == "failed":
                row.state, row.error_code = "pending", None

    def _live_leases(self) -> list[tuple[_JobRow, Lease]]:
        now = self._clock()
        return [
            (row, row.lease)
            for row in self._tables.jobs.values()
            if row.lease is not None and row.lease.expires_at > now
        ]

    async def next_lease_expiry_in(self) -> float | None:
        now = self._clock()
        expiries = [
            lease.expires_at for row, lease in self._live_leases() if row.state in ("pending", "running")
        ]
        return (min(expiries) - now).total_seconds() if expiries else None

    async def leases_of(self, owner: str) -> list[HeldLease]:
        held = [
            (row, lease)
            for row, lease in self._live_leases()
            if lease.owner == owner and row.state == "running"
        ]
        held.sort(key=lambda pair: pair[0].created_at)
        return [HeldLease(row.job_id, row.material_id, lease.token) for row, lease in held]

    async def release_dead_lease(self, job_id: uuid.UUID, owner: str, token: uuid.UUID) -> bool:
        row = self._tables.jobs.get(job_id)
        if row is None or row.lease is None or row.state != "running":
            return False
        if (row.lease.owner, row.lease.token) != (owner, token):
            return False
        row.state, row.lease = "pending", None
        return True

    async def live_tokens(
        self, tokens: Sequence[uuid.UUID], material_ids: Sequence[uuid.UUID] = ()
    ) -> set[uuid.UUID]:
        wanted = set(tokens)
        live = {
            row.lease.token for row in self._tables.jobs.values() if row.lease and row.lease.token in wanted
        }
        for material_id in material_ids:
            row = self._tables.materials.get(material_id)
            for ref in row.outputs.values() if row is not None else ():
                parts = ref.split("/")
                token = canonical_uuid(parts[2]) if len(parts) > 2 else None
                if token is not None:
                    live.add(token)
        return live


class MemoryInstances(_Rows):
    async def register(self, instance_id: str) -> None:
        now = self._clock()
        row = self._tables.instances.get(instance_id)
        if row is None:
            self._tables.instances[instance_id] = _InstanceRow(instance_id, now, now)
        else:
            row.seen_at, row.draining = now, False

    async def set_draining(self, instance_id: str) -> None:
        now = self._clock()
        row = self._tables.instances.setdefault(instance_id, _InstanceRow(instance_id, now, now))
        row.seen_at, row.draining = now, True


class MemoryListing(_Rows):
    async def materials(
        self, owner: str, limit: int, after: tuple[datetime, uuid.UUID] | None
    ) -> list[Material]:
        now = self._clock()
        rows = [row for row in self._tables.materials.values() if row.new.owner == owner]
        rows.sort(key=lambda r: (r.created_at, r.new.material_id), reverse=True)
        if after is not None:
            rows = [r for r in rows if (r.created_at, r.new.material_id) < after]
        return [_material_of(row, now) for row in rows[:limit]]

    async def instances(self, limit: int) -> list[InstanceRecord]:
        now = self._clock()
        rows = sorted(self._tables.instances.values(), key=lambda r: r.instance_id)
        rows.sort(key=lambda r: r.seen_at, reverse=True)
        leased = [
            job.lease.owner
            for job in self._tables.jobs.values()
            if job.lease is not None and job.lease.expires_at > now and job.state == "running"
        ]
        return [
            InstanceRecord(r.instance_id, r.started_at, r.seen_at, r.draining, leased.count(r.instance_id))
            for r in rows[:limit]
        ]


class MemoryMediaUnitOfWork(MemoryUnitOfWork):
    """One fake transaction: its stores read the clock once, at its start (PostgreSQL's `now()`)."""

    def __init__(self, media: MemoryMedia) -> None:
        super().__init__()
        self.outbox = media.outbox
        self._media = media
        self._started_at: datetime | None = None
        tables, now = media.tables, self._transaction_time
        self.materials = MemoryMaterials(tables, now)
        self.sessions = MemorySessions(tables, now)
        self.jobs = MemoryJobs(tables, now)
        self.instances = MemoryInstances(tables, now)
        self.listing = MemoryListing(tables, now)

    def _transaction_time(self) -> datetime:
        if self._started_at is None:
            raise RuntimeError("the unit of work is not open")
        return self._started_at

    def stores(self) -> Sequence[object]:
        return (self._media.tables,)

    async def __aenter__(self) -> Self:
        entered = await super().__aenter__()
        self._started_at = self._media.clock()
        return entered

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._started_at = None
        await super().__aexit__(exc_type, exc, tb)


class MemoryMedia:
    """The fake media schema: its rows, its committed outbox and its clock (the "database clock").
    `unit_of_work` is the factory use cases take."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.tables = MemoryMediaTables()
        self.outbox = MemoryOutbox()
        self.clock: Clock = clock or StrictClock()

    def unit_of_work(self) -> MemoryMediaUnitOfWork:
        return MemoryMediaUnitOfWork(self)

    def committed_events(self) -> list[OutboxMessage]:
        return list(self.outbox.committed)


# --- locks, storage, transcoder, capability -------------------------------------------------------------


class MemoryLocks:
    def __init__(self) -> None:
        self.held: set[str] = set()

    def material(self, material_id: uuid.UUID) -> contextlib.AbstractAsyncContextManager[bool]:
        return self._hold(f"material:{material_id}")

    def merge_slot(self) -> contextlib.AbstractAsyncContextManager[bool]:
        return self._hold("merge-slot")

    @contextlib.asynccontextmanager
    async def _hold(self, key: str) -> AsyncIterator[bool]:
        if key in self.held:
            yield False
            return
        self.held.add(key)
        try:
            yield True
        finally:
            self.held.discard(key)


class MemoryStorage:
    """Files by key in `files`; paths under `root` name them (the transcoder reads and writes through
    `read_local` / `write_local`). A write stores its file only once its whole body was read."""

    def __init__(self, free_bytes: int | None = PLENTY_FREE_BYTES) -> None:
        self.root = STORAGE_ROOT
        self.files: dict[str, bytes] = {}
        self.work_names: set[str] = set()
        self.free: int | None = free_bytes

    def free_bytes(self) -> int | None:
        return self.free

    def _key_of(self, path: Path) -> str:
        normal = PurePosixPath(posixpath.normpath(path))
        if not normal.is_relative_to(self.root):
            raise ValueError("storage key escapes the storage root")
        return str(normal.relative_to(self.root))

    def local_path(self, key: str) -> Path:
        path = self.root / key
        self._key_of(path)
        return path

    def read_local(self, path: Path) -> bytes | None:
        return self.files.get(self._key_of(path))

    def write_local(self, path: Path, data: bytes) -> None:
        """What a transcoder writes into a work folder."""
        key = self._key_of(path)
        if not key.startswith(f"{WORK_FOLDER}/"):
            raise ValueError("only work folders are written in place")
        self.files[key] = data

    @staticmethod
    def _chunk_key(session_id: uuid.UUID, index: int) -> str:
        return f"chunks/{session_id}/{index:06d}.chunk"

    async def write_chunk(self, chunk: ChunkTarget, body: AsyncIterator[bytes]) -> None:
        data = bytearray()
        async for piece in body:
            data += piece
            if len(data) > chunk.size_bytes:
                raise InvalidUpload("chunk_size_mismatch")
        if len(data) != chunk.size_bytes:
            raise InvalidUpload("chunk_size_mismatch")
        if chunk.sha256 is not None and hashlib.sha256(data).hexdigest() != chunk.sha256.lower():
            raise InvalidUpload("chunk_checksum_mismatch")
        self.files[self._chunk_key(chunk.session_id, chunk.index)] = bytes(data)

    def has_chunk(self, session_id: uuid.UUID, index: int) -> bool:
        return self._chunk_key(session_id, index) in self.files

    async def merge_chunks(self, session_id: uuid.UUID, chunk_count: int, key: str) -> StoredFile:
        data = b"".join(self.files[self._chunk_key(session_id, i)] for i in range(chunk_count))
        return self._store(key, data)

    def _remove_under(self, prefix: str) -> None:
        for key in [k for k in self.files if k.startswith(f"{prefix}/")]:
            del self.files[key]

    async def remove_chunks(self, session_id: uuid.UUID) -> None:
        self._remove_under(f"chunks/{session_id}")

    def _store(self, key: str, data: bytes) -> StoredFile:
        self.local_path(key)
        self.files[key] = data
        return StoredFile(key, len(data), hashlib.sha256(data).hexdigest())

    async def write_stream(self, key: str, body: AsyncIterator[bytes]) -> StoredFile:
        data = bytearray()
        async for piece in body:
            data += piece
        return self._store(key, bytes(data))

    def has_file(self, key: str) -> bool:
        return key in self.files

    async def put_file(self, local_file: Path, key: str) -> StoredFile:
        data = self.read_local(local_file)
        if data is None:
            raise FileNotFoundError(local_file)
        return self._store(key, data)

    def work_dir(self, name: str) -> Path:
        path = self.local_path(f"{WORK_FOLDER}/{name}")
        self.work_names.add(name)
        return path

    async def remove_work_dir(self, name: str) -> None:
        self.work_names.discard(name)
        self._remove_under(f"{WORK_FOLDER}/{name}")

    def _folders(self, key_parts: int) -> set[tuple[str, ...]]:
        return {tuple(key.split("/")[:key_parts]) for key in self.files if key.count("/") >= key_parts}

    def work_folders(self) -> list[AttemptFolder]:
        names = self.work_names | {parts[1] for parts in self._folders(2) if parts[0] == WORK_FOLDER}
        folders = []
        for name in sorted(names):
            token = work_folder_token(name)
            if token is not None:
                folders.append(AttemptFolder(f"{WORK_FOLDER}/{name}", token, None))
        return folders

    def output_folders(self, material_ids: Iterable[uuid.UUID] | None = None) -> list[AttemptFolder]:
        wanted = None if material_ids is None else {str(m) for m in material_ids}
        folders = []
        for top, material, name in sorted(self._folders(3)):
            material_id, token = canonical_uuid(material), canonical_uuid(name)
            if top != OUTPUTS_FOLDER or material_id is None or token is None:
                continue
            if wanted is None or material in wanted:
                folders.append(AttemptFolder(f"{top}/{material}/{name}", token, material_id))
        return folders

    async def remove_attempt_folder(self, folder: AttemptFolder) -> None:
        top = folder.key.split("/", 1)[0]
        if top not in (WORK_FOLDER, OUTPUTS_FOLDER):
            raise ValueError("not an attempt folder")
        if top == WORK_FOLDER:
            self.work_names.discard(folder.key.split("/", 1)[1])
        self._remove_under(folder.key)


# What the fake transcoder takes for a video: an ISO base media file (MP4), whose first box is `ftyp`.
VIDEO_SIGNATURE = b"ftyp"
RENDERED_MARK = b"rendered:"


class MemoryMediaTools:
    """Renders marked files into `storage`'s work folders: a source that is no MP4 (or missing) fails with
    `ffmpeg_failed`, and `verify` accepts only what `render` wrote for that output.

    Test knobs: `missing_tool` (fails like a missing ffmpeg), `broken_outputs` (renders garbage that
    verification refuses), `hold` (a render waits for it, or for `abort`) and `rendering` (set while a
    render waits)."""

    def __init__(self, storage: MemoryStorage) -> None:
        self._storage = storage
        self.missing_tool = False
        self.broken_outputs = False
        self.hold: asyncio.Event | None = None
        self.rendering = asyncio.Event()
        self.renders: list[str] = []

    async def render(self, source: Path, output: Output, target: Path, abort: asyncio.Event) -> None:
        if self.missing_tool:
            raise TranscodeFailure("ffmpeg_missing")
        if self.hold is not None and not abort.is_set():
            self.rendering.set()
            waiters = {asyncio.ensure_future(self.hold.wait()), asyncio.ensure_future(abort.wait())}
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
                self.rendering.clear()
        if abort.is_set():
            raise Aborted()
        data = self._storage.read_local(source)
        if data is None or data[4:8] != VIDEO_SIGNATURE:
            raise TranscodeFailure("ffmpeg_failed")
        self.renders.append(output.kind)
        rendered = b"garbage" if self.broken_outputs else RENDERED_MARK + output.kind.encode()
        self._storage.write_local(target, rendered)

    async def verify(self, output: Output, target: Path) -> None:
        data = self._storage.read_local(target)
        if not data:
            raise TranscodeFailure(f"{output.kind}_missing")
        if data != RENDERED_MARK + output.kind.encode():
            raise TranscodeFailure(f"{output.kind}_invalid")


class MemoryCapability:
    def __init__(self) -> None:
        self.instance_id: str | None = None

    def publish(self, instance_id: str) -> None:
        self.instance_id = instance_id

    def read(self) -> str | None:
        return self.instance_id
