"""Upload use cases: plain multipart, chunked init / chunk / complete.

Contracts:
- A plain upload streams straight to a unique partial file of the storage; nothing is buffered whole.
- A chunk attempt waits at most `Limits.chunk_slot_wait_seconds` for one of the chunk slots, then is
  refused with `chunk_slots_busy` (429 + Retry-After).
- `complete` merges in one global slot (this process's lock + the session row's `merging` state) and is
  idempotent: a completed session returns its material.
- The material, its transcode job and `MaterialUploaded` are written in one transaction. If that transaction
  fails, the stored source stays where it is: no path of this module deletes a source.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from media_worker.adapters.repository import MediaRepository
from media_worker.adapters.storage import Storage, StoredFile, source_key
from media_worker.domain.errors import (
    ChunkSlotsBusy,
    InvalidUpload,
    MergeInProgress,
    NotFound,
    UploadConflict,
    UploadTooLarge,
)
from media_worker.domain.layout import ChunkLayout
from media_worker.domain.limits import Limits
from media_worker.service_layer.activity import Activity
from media_worker.service_layer.events import EventWriter

__all__ = ["MERGE_STALE_SECONDS", "InitOutcome", "UploadService", "UploadSession"]

MERGE_STALE_SECONDS = 900.0  # a `merging` session untouched this long was abandoned by a dead instance


@dataclass(frozen=True)
class UploadSession:
    session_id: uuid.UUID
    layout: ChunkLayout
    received: frozenset[int]
    state: str
    material_id: uuid.UUID

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> UploadSession:
        return cls(
            row["id"],
            ChunkLayout(row["total_bytes"], row["chunk_bytes"]),
            frozenset(row["received"]),
            row["state"],
            row["material_id"],
        )


@dataclass(frozen=True)
class InitOutcome:
    session: UploadSession
    created: bool  # False: an existing session of the same upload key and layout was resumed


class UploadService:
    def __init__(
        self,
        pool: asyncpg.Pool,
        repo: MediaRepository,
        storage: Storage,
        events: EventWriter,
        activity: Activity,
        *,
        instance_id: str,
        limits: Limits | None = None,
        job_queued: Callable[[], None] | None = None,
    ) -> None:
        self._pool = pool
        self._repo = repo
        self._storage = storage
        self._events = events
        self._activity = activity
        self._instance_id = instance_id
        self.limits = limits or Limits()
        self._job_queued = job_queued
        self._chunk_slots = asyncio.Semaphore(self.limits.max_concurrent_chunk_writes)
        self._merge_slot = asyncio.Lock()

    async def _record_material(
        self,
        *,
        material_id: uuid.UUID,
        owner: str,
        title: str,
        mode: str,
        stored: StoredFile,
        content_type: str | None,
        session_id: uuid.UUID | None = None,
    ) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await self._repo.create_material(
                conn,
                material_id=material_id,
                owner=owner,
                title=title,
                upload_mode=mode,
                source_key=stored.key,
                size_bytes=stored.size_bytes,
                sha256=stored.sha256,
                content_type=content_type,
            )
            await self._events.emit(
                conn,
                "MaterialUploaded",
                str(material_id),
                {
                    "upload_mode": mode,
                    "size_bytes": stored.size_bytes,
                    "content_type": content_type,
                    "source_sha256": stored.sha256,
                    "uploaded_by": owner,
                },
            )
            if session_id is not None:
                await self._repo.finish_merge(conn, session_id, stored.key)
        if self._job_queued is not None:
            self._job_queued()

    async def upload_plain(
        self, owner: str, title: str, content_type: str | None, body: AsyncIterator[bytes]
    ) -> uuid.UUID:
        """`body` yields the file's bytes; the request length was checked before parsing began."""
        limits = self.limits

        async def guarded() -> AsyncIterator[bytes]:
            seen = 0
            async for piece in body:
                seen += len(piece)
                limits.check_plain_source_size(seen)
                yield piece
            if seen == 0:
                raise InvalidUpload("invalid_multipart")

        with self._activity.upload():
            material_id = uuid.uuid4()
            stored = await self._storage.write_stream(source_key(material_id), guarded())
            await self._record_material(
                material_id=material_id,
                owner=owner,
                title=title,
                mode="multipart",
                stored=stored,
                content_type=content_type,
            )
            return material_id

    async def init(
        self,
        owner: str,
        upload_key: str,
        total_bytes: int,
        chunk_bytes: int,
        title: str,
        content_type: str | None,
    ) -> InitOutcome:
        """Fix the layout (or resume the session of `upload_key` when the layout is identical)."""
        self._activity.refuse_if_draining()
        layout = ChunkLayout.plan(total_bytes, chunk_bytes, self.limits)
        async with self._pool.acquire() as conn:
            existing = await self._repo.find_session(conn, owner, upload_key)
            inserted = None
            if existing is None:
                self.limits.check_init_free_space(total_bytes, self._storage.free_bytes())
                inserted = await self._repo.insert_session(
                    conn,
                    {
                        "id": uuid.uuid4(),
                        "owner_subject": owner,
                        "upload_key": upload_key,
                        "title": title,
                        "content_type": content_type,
                        "total_bytes": total_bytes,
                        "chunk_bytes": chunk_bytes,
                        "chunk_count": layout.chunk_count,
                        "material_id": uuid.uuid4(),
                    },
                )
                # None: a concurrent init of the same key won the insert; this one resumes it
                existing = inserted or await self._repo.find_session(conn, owner, upload_key)
            assert existing is not None
        session = UploadSession.from_row(existing)
        if session.layout != layout:
            raise UploadConflict("layout_conflict")
        return InitOutcome(session, created=inserted is not None)

    async def session(self, owner: str, session_id: uuid.UUID) -> UploadSession:
        async with self._pool.acquire() as conn:
            row = await self._repo.get_session(conn, session_id, owner)
        if row is None:
            raise NotFound()
        return UploadSession.from_row(row)

    async def put_chunk(
        self,
        owner: str,
        session_id: uuid.UUID,
        index: int,
        declared_bytes: int | None,
        body: AsyncIterator[bytes],
        sha256: str | None,
    ) -> UploadSession:
        session = await self.session(owner, session_id)
        expected = session.layout.size_of(index)
        if declared_bytes is not None and declared_bytes != expected:
            if declared_bytes > self.limits.chunk_max_bytes:
                raise UploadTooLarge("chunk_too_large")
            raise InvalidUpload("chunk_size_mismatch")
        if session.state != "open":
            raise UploadConflict("upload_not_open")
        if index in session.received and self._storage.has_chunk(session_id, index):
            return session  # a retried chunk that already landed
        with self._activity.upload():
            try:
                await asyncio.wait_for(self._chunk_slots.acquire(), self.limits.chunk_slot_wait_seconds)
            except TimeoutError:
                raise ChunkSlotsBusy() from None
            try:
                await self._storage.write_chunk(
                    session_id, index, body, expected_bytes=expected, expected_sha256=sha256
                )
            finally:
                self._chunk_slots.release()
            async with self._pool.acquire() as conn:
                await self._repo.add_received(conn, session_id, index)
        return await self.session(owner, session_id)

    async def complete(self, owner: str, session_id: uuid.UUID) -> uuid.UUID:
        session = await self.session(owner, session_id)
        if session.state == "completed":
            return session.material_id
        if session.layout.missing(session.received):
            raise UploadConflict("upload_incomplete")
        with self._activity.merge():
            async with self._merge_slot, self._cluster_merge_slot():
                async with self._pool.acquire() as conn:
                    row = await self._repo.begin_merge(
                        conn, session_id, owner, self._instance_id, MERGE_STALE_SECONDS
                    )
                if row is None:
                    again = await self.session(owner, session_id)
                    if again.state == "completed":
                        return again.material_id
                    raise MergeInProgress()
                try:
                    await self._merge(owner, row, session)
                except BaseException:
                    async with self._pool.acquire() as conn:
                        await self._repo.abort_merge(conn, session_id)
                    raise
        await self._storage.remove_chunks(session_id)
        return session.material_id

    @contextlib.asynccontextmanager
    async def _cluster_merge_slot(self) -> AsyncIterator[None]:
        """The merge slot across instances: a session advisory lock held for the whole merge. Busy means
        `merge_in_progress` (409, retry later): `complete` is idempotent."""
        key = f"{self._repo.schema}:merge-slot"
        async with self._pool.acquire() as conn:
            if not await conn.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", key):
                raise MergeInProgress()
            try:
                yield
            finally:
                await conn.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", key)

    async def _merge(self, owner: str, row: Mapping[str, Any], session: UploadSession) -> None:
        layout = session.layout
        self.limits.check_merge_free_space(layout.total_bytes, self._storage.free_bytes())
        if any(not self._storage.has_chunk(session.session_id, i) for i in range(layout.chunk_count)):
            raise UploadConflict("upload_incomplete")
        stored = await self._storage.merge_chunks(
            session.session_id, layout.chunk_count, source_key(session.material_id)
        )
        if stored.size_bytes != layout.total_bytes:
            raise InvalidUpload("chunk_size_mismatch")
        await self._record_material(
            material_id=session.material_id,
            owner=owner,
            title=row["title"],
            mode="chunked",
            stored=stored,
            content_type=row["content_type"],
            session_id=session.session_id,
        )
