"""The ports media-worker's use cases take: the unit of work and its stores, locks, storage, the transcoder
and the capability.

Each has the real adapter in `adapters/` (PostgreSQL, a local folder, ffmpeg, a file) and a fake in
`adapters/memory.py`; `tests/ports/media_worker/` runs one contract suite per port against both.

Store writes happen inside a unit of work (one transaction). Job writes after a claim are fenced: they
take effect only while the caller's lease (owner, token, expiry by the store's clock) is current, and raise
`LeaseLost` otherwise, so a stale worker writes nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from media_worker.domain.material import Material, NewMaterial
from media_worker.domain.outputs import Output
from media_worker.domain.sessions import UploadSession
from yovision_platform.storage import Lease, UnitOfWork

__all__ = [
    "AttemptFolder",
    "Capability",
    "ChunkTarget",
    "ClaimedJob",
    "HeldLease",
    "InstanceRecord",
    "InstanceStore",
    "JobStore",
    "MaterialStore",
    "MediaListing",
    "MediaLocks",
    "MediaTools",
    "MediaUnitOfWork",
    "SessionStore",
    "Storage",
    "StoredFile",
    "UnitOfWorkFactory",
]


@dataclass(frozen=True)
class ClaimedJob:
    job_id: uuid.UUID
    material_id: uuid.UUID
    lease: Lease
    trace_parent: str | None = None  # the W3C context of the work that queued the job


@dataclass(frozen=True)
class HeldLease:
    """A current lease on a running job, as read (to release it only if it is still that very lease)."""

    job_id: uuid.UUID
    material_id: uuid.UUID
    token: uuid.UUID


@dataclass(frozen=True)
class InstanceRecord:
    instance_id: str
    started_at: datetime
    seen_at: datetime
    draining: bool
    leased_jobs: int  # running jobs with a current lease of this instance


class MaterialStore(Protocol):
    async def add(self, material: NewMaterial) -> None: ...

    async def get(self, material_id: uuid.UUID, owner: str) -> Material | None:
        """The owner's material; None for an unknown one or another owner's."""
        ...

    async def lock(self, material_id: uuid.UUID) -> Material:
        """Read the material and hold it against concurrent writers until the unit of work ends."""
        ...

    async def set_processing(self, material_id: uuid.UUID) -> Material:
        """Status processing, progress 0, no error code."""
        ...

    async def raise_progress(self, material_id: uuid.UUID, progress: int) -> None:
        """Only while processing, and never lower."""
        ...

    async def complete(self, material_id: uuid.UUID, outputs: Mapping[str, str]) -> None:
        """Done at 100 %; fills only output references still empty (a concurrent writer's values win)."""
        ...

    async def fail(self, material_id: uuid.UUID, error_code: str) -> None: ...

    async def back_to_pending(self, material_id: uuid.UUID) -> None:
        """processing -> pending (its job was handed back); any other status stays."""
        ...

    async def reset_failed(self, material_id: uuid.UUID, owner: str) -> bool:
        """failed -> pending (progress 0, no error code); False when it is not the owner's failed material."""
        ...


class SessionStore(Protocol):
    async def find(self, owner: str, upload_key: str) -> UploadSession | None: ...

    async def get(self, session_id: uuid.UUID, owner: str) -> UploadSession | None: ...

    async def add(self, session: UploadSession) -> UploadSession | None:
        """Insert an open session; None when the owner has a session of that upload key already."""
        ...

    async def add_received(self, session_id: uuid.UUID, index: int) -> None:
        """Record a stored chunk, only while the session is open."""
        ...

    async def begin_merge(
        self, session_id: uuid.UUID, owner: str, instance_id: str, stale_seconds: float
    ) -> UploadSession | None:
        """The store's guard of a merge: open (or merging for `stale_seconds` already: abandoned) ->
        merging; None when the session is neither (another request merges it, or it completed)."""
        ...

    async def finish_merge(self, session_id: uuid.UUID, merged_key: str) -> None:
        """merging -> completed."""
        ...

    async def abort_merge(self, session_id: uuid.UUID) -> None:
        """merging -> open."""
        ...


class JobStore(Protocol):
    async def add(self, material_id: uuid.UUID, *, trace_parent: str | None = None) -> uuid.UUID:
        """The material's one transcode job, pending; its id. Its transcode continues `trace_parent`."""
        ...

    async def claim(self, owner: str, lease_seconds: float) -> ClaimedJob | None:
        """The oldest due job (pending, or running with an expired lease) under a new lease."""
        ...

    async def start(self, job_id: uuid.UUID, lease: Lease) -> int:
        """Fenced: running, with the next attempt number (returned)."""
        ...

    async def renew(self, job_id: uuid.UUID, lease: Lease, lease_seconds: float) -> None:
        """Fenced: the lease runs `lease_seconds` from now."""
        ...

    async def finish(
        self, job_id: uuid.UUID, lease: Lease, *, state: str, error_code: str | None = None
    ) -> None:
        """Fenced final write (`done` or `failed`) that also ends the lease."""
        ...

    async def release(self, job_id: uuid.UUID, lease: Lease) -> None:
        """Fenced hand-back of an unfinished job: pending, without a lease."""
        ...

    async def reset_failed(self, material_id: uuid.UUID) -> None:
        """The material's failed job -> pending, without its error code."""
        ...

    async def next_lease_expiry_in(self) -> float | None:
        """Seconds until the earliest current lease of an unfinished job expires; None if there is none."""
        ...

    async def leases_of(self, owner: str) -> list[HeldLease]:
        """Current leases of `owner` on running jobs."""
        ...

    async def release_dead_lease(self, job_id: uuid.UUID, owner: str, token: uuid.UUID) -> bool:
        """Hand back a running job whose executor is known dead (the caller holds the material's lock):
        pending, without a lease. Matches only the lease that was read; False when it changed."""
        ...

    async def live_tokens(
        self, tokens: Sequence[uuid.UUID], material_ids: Sequence[uuid.UUID] = ()
    ) -> set[uuid.UUID]:
        """Which of `tokens` may still be needed: a job's current lease token (its executor may still
        write), or, for `material_ids`, the token in a recorded output's key. One snapshot for both."""
        ...


class InstanceStore(Protocol):
    async def register(self, instance_id: str) -> None:
        """Record the instance as seen now and not draining."""
        ...

    async def set_draining(self, instance_id: str) -> None: ...


class MediaListing(Protocol):
    async def materials(
        self, owner: str, limit: int, after: tuple[datetime, uuid.UUID] | None
    ) -> list[Material]:
        """The owner's materials, newest first (`created_at`, then id, descending), after the keyset
        `after`."""
        ...

    async def instances(self, limit: int) -> list[InstanceRecord]:
        """Every registered instance, the last seen first (then by id)."""
        ...


class MediaUnitOfWork(UnitOfWork, Protocol):
    """One transaction over media-worker's stores (and the outbox)."""

    @property
    def materials(self) -> MaterialStore: ...

    @property
    def sessions(self) -> SessionStore: ...

    @property
    def jobs(self) -> JobStore: ...

    @property
    def instances(self) -> InstanceStore: ...

    @property
    def listing(self) -> MediaListing: ...


UnitOfWorkFactory = Callable[[], MediaUnitOfWork]


class MediaLocks(Protocol):
    """Exclusive locks across every instance, taken without waiting: each yields True when this holder got
    it (and holds it until the block ends), False when another holder has it."""

    def material(self, material_id: uuid.UUID) -> AbstractAsyncContextManager[bool]:
        """Held by the one live executor of a material for its whole run (and by recovery)."""
        ...

    def merge_slot(self) -> AbstractAsyncContextManager[bool]:
        """The one merge slot of all instances."""
        ...


@dataclass(frozen=True)
class ChunkTarget:
    """Where a chunk goes and what it must be: exactly `size_bytes`, with the SHA-256 the client sent."""

    session_id: uuid.UUID
    index: int
    size_bytes: int
    sha256: str | None = None


@dataclass(frozen=True)
class StoredFile:
    key: str
    size_bytes: int
    sha256: str


@dataclass(frozen=True)
class AttemptFolder:
    """A temporary folder that one transcode attempt wrote: `work/<job>-<token>/` (ffmpeg's files) or
    `outputs/<material>/<token>/` (outputs stored before the attempt was recorded)."""

    key: str
    token: uuid.UUID
    material_id: uuid.UUID | None  # set for an outputs folder


class Storage(Protocol):
    """Sources, chunks and outputs by key. A write is all or nothing: a failed one (whatever ended its
    body) leaves nothing behind. Nothing here deletes a source."""

    def free_bytes(self) -> int | None:
        """Free space, or None when unknown."""
        ...

    async def write_chunk(self, chunk: ChunkTarget, body: AsyncIterator[bytes]) -> None:
        """Store a chunk of exactly its size (else `InvalidUpload(chunk_size_mismatch)`, read no further than
        one byte over) with its SHA-256 if given (else `chunk_checksum_mismatch`)."""
        ...

    def has_chunk(self, session_id: uuid.UUID, index: int) -> bool: ...

    async def merge_chunks(self, session_id: uuid.UUID, chunk_count: int, key: str) -> StoredFile: ...

    async def remove_chunks(self, session_id: uuid.UUID) -> None: ...

    async def write_stream(self, key: str, body: AsyncIterator[bytes]) -> StoredFile: ...

    def has_file(self, key: str) -> bool: ...

    async def put_file(self, local_file: Path, key: str) -> StoredFile:
        """Store a file of the work area (`work_dir`) under `key`."""
        ...

    def local_path(self, key: str) -> Path:
        """Where the transcoder and the HTTP server read a stored file."""
        ...

    def work_dir(self, name: str) -> Path:
        """A work folder `work/<name>/` (created) for a transcoder's files."""
        ...

    async def remove_work_dir(self, name: str) -> None: ...

    def work_folders(self) -> list[AttemptFolder]:
        """Every `work/<job>-<token>/` folder."""
        ...

    def output_folders(self, material_ids: Iterable[uuid.UUID] | None = None) -> list[AttemptFolder]:
        """The `outputs/<material>/<token>/` folders of `material_ids` (None: of every material)."""
        ...

    async def remove_attempt_folder(self, folder: AttemptFolder) -> None:
        """Remove one attempt's folder (only `work/` and `outputs/` folders qualify)."""
        ...


class MediaTools(Protocol):
    """Renders and verifies one output of a source (ffmpeg and ffprobe): `TranscodeFailure` with a stable
    code on a definite failure, `Aborted` once `abort` is set."""

    async def render(self, source: Path, output: Output, target: Path, abort: asyncio.Event) -> None: ...

    async def verify(self, output: Output, target: Path) -> None: ...


class Capability(Protocol):
    """This instance's published capability: the instance id the drain check compares against."""

    def publish(self, instance_id: str) -> None: ...

    def read(self) -> str | None:
        """The published instance id; None when missing or unreadable (= unknown)."""
        ...
