"""Upload use cases: plain multipart, chunked init / state / chunk / complete.

Contracts:
- A plain upload's declared request length is checked before any byte is read; the source streams straight
  into the storage, nothing is buffered whole, and it must stay below the chunked threshold.
- A chunk attempt waits at most `Limits.chunk_slot_wait_seconds` for one of the chunk slots, then is
  refused with `chunk_slots_busy` (429 + Retry-After).
- `complete` merges in one global slot (this process's lock, the merge slot of all instances and the
  session's `merging` state) and is idempotent: a completed session returns its material.
- The material, its transcode job and `MaterialUploaded` are written in one unit of work. If it fails, the
  stored source stays where it is: no path of this module deletes a source.
- No unit of work stays open while a body is read or a file is written.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from opentelemetry.trace import Span

from media_worker.domain.errors import (
    ChunkSlotsBusy,
    InvalidUpload,
    MaterialNotFound,
    MergeInProgress,
    UploadConflict,
    UploadTooLarge,
)
from media_worker.domain.keys import source_key
from media_worker.domain.layout import ChunkLayout
from media_worker.domain.limits import Limits
from media_worker.domain.material import NewMaterial, UploadMode
from media_worker.domain.sessions import SessionState, UploadSession
from media_worker.service_layer.dependencies import InstanceDependencies
from media_worker.service_layer.ports import ChunkTarget, StoredFile
from yovision_platform.observability import context_of, current_traceparent, tracer

__all__ = ["MERGE_STALE_SECONDS", "InitOutcome", "Uploads"]

_tracer = tracer(__name__)
MERGE_STALE_SECONDS = 900.0  # a `merging` session untouched this long was abandoned by a dead instance


@dataclass(frozen=True)
class InitOutcome:
    session: UploadSession
    created: bool  # False: an existing session of the same upload key and layout was resumed


class Uploads:
    def __init__(
        self,
        dependencies: InstanceDependencies,
        *,
        limits: Limits | None = None,
        job_queued: Callable[[], None] | None = None,
    ) -> None:
        self._uow = dependencies.uow
        self._locks = dependencies.locks
        self._storage = dependencies.storage
        self._events = dependencies.events
        self._activity = dependencies.activity
        self._instance_id = dependencies.instance_id
        self.limits = limits or Limits()
        self._job_queued = job_queued
        self._chunk_slots = asyncio.Semaphore(self.limits.max_concurrent_chunk_writes)
        self._merge_slot = asyncio.Lock()

    async def _record_material(
        self, material: NewMaterial, *, merged_session: uuid.UUID | None = None
    ) -> None:
        async with self._uow() as uow:
            await uow.materials.add(material)
            await uow.jobs.add(material.material_id, trace_parent=current_traceparent())
            await self._events.emit(
                uow.outbox,
                "MaterialUploaded",
                str(material.material_id),
                {
                    "upload_mode": material.upload_mode.value,
                    "size_bytes": material.size_bytes,
                    "content_type": material.content_type,
                    "source_sha256": material.sha256,
                    "uploaded_by": material.owner,
                },
            )
            if merged_session is not None:
                await uow.sessions.finish_merge(merged_session, material.source_key)
        if self._job_queued is not None:
            self._job_queued()

    async def upload_plain(
        self,
        owner: str,
        title: str,
        content_type: str | None,
        body: AsyncIterator[bytes],
        *,
        request_length: str | None,
    ) -> uuid.UUID:
        """`body` yields the file's bytes; `request_length` is the whole request's declared length
        (`Content-Length`), refused before the first byte of `body` is read."""
        limits = self.limits
        limits.check_plain_request_length(request_length)
        self._activity.refuse_if_draining()

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
                _new_material(material_id, owner, title, UploadMode.MULTIPART, stored, content_type)
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
        async with self._uow() as uow:
            existing = await uow.sessions.find(owner, upload_key)
            inserted = None
            if existing is None:
                self.limits.check_init_free_space(total_bytes, self._storage.free_bytes())
                inserted = await uow.sessions.add(
                    UploadSession(
                        uuid.uuid4(),
                        owner,
                        upload_key,
                        layout,
                        uuid.uuid4(),
                        title,
                        content_type,
                        trace_parent=current_traceparent(),
                    )
                )
                # None: a concurrent init of the same key won the insert; this one resumes it
                existing = inserted or await uow.sessions.find(owner, upload_key)
            assert existing is not None
        if existing.layout != layout:
            raise UploadConflict("layout_conflict")
        return InitOutcome(existing, created=inserted is not None)

    async def session(self, owner: str, session_id: uuid.UUID) -> UploadSession:
        async with self._uow() as uow:
            return MaterialNotFound.unless_found(await uow.sessions.get(session_id, owner))

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
        if session.state != SessionState.OPEN:
            raise UploadConflict("upload_not_open")
        if index in session.received and self._storage.has_chunk(session_id, index):
            return session  # a retried chunk that already landed
        with _in_trace_of(session, "upload chunk"), self._activity.upload():
            try:
                await asyncio.wait_for(self._chunk_slots.acquire(), self.limits.chunk_slot_wait_seconds)
            except TimeoutError:
                raise ChunkSlotsBusy() from None
            try:
                await self._storage.write_chunk(ChunkTarget(session_id, index, expected, sha256), body)
            finally:
                self._chunk_slots.release()
            async with self._uow() as uow:
                await uow.sessions.add_received(session_id, index)
        return await self.session(owner, session_id)

    async def complete(self, owner: str, session_id: uuid.UUID) -> uuid.UUID:
        session = await self.session(owner, session_id)
        if session.state == SessionState.COMPLETED:
            return session.material_id
        if session.missing:
            raise UploadConflict("upload_incomplete")
        with _in_trace_of(session, "upload complete"), self._activity.merge():
            async with self._merge_slot, self._locks.merge_slot() as held:
                if not held:  # another instance merges: retry later, `complete` is idempotent
                    raise MergeInProgress()
                async with self._uow() as uow:
                    merging = await uow.sessions.begin_merge(
                        session_id, owner, self._instance_id, MERGE_STALE_SECONDS
                    )
                if merging is None:
                    again = await self.session(owner, session_id)
                    if again.state == SessionState.COMPLETED:
                        return again.material_id
                    raise MergeInProgress()
                try:
                    await self._merge(merging)
                except BaseException:
                    async with self._uow() as uow:
                        await uow.sessions.abort_merge(session_id)
                    raise
        await self._storage.remove_chunks(session_id)
        return session.material_id

    async def _merge(self, session: UploadSession) -> None:
        layout = session.layout
        self.limits.check_merge_free_space(layout.total_bytes, self._storage.free_bytes())
        if any(not self._storage.has_chunk(session.session_id, i) for i in range(layout.chunk_count)):
            raise UploadConflict("upload_incomplete")
        stored = await self._storage.merge_chunks(
            session.session_id, layout.chunk_count, source_key(session.material_id)
        )
        if stored.size_bytes != layout.total_bytes:
            raise InvalidUpload("chunk_size_mismatch")
        material = _new_material(
            session.material_id,
            session.owner,
            session.title,
            UploadMode.CHUNKED,
            stored,
            session.content_type,
        )
        await self._record_material(material, merged_session=session.session_id)


def _in_trace_of(session: UploadSession, name: str) -> AbstractContextManager[Span]:
    """A span of the session's own trace (the one its first request started): each chunk and the merge of
    one upload are in one trace, whatever trace their own requests carry."""
    return _tracer.start_as_current_span(
        name,
        context=context_of(session.trace_parent),
        attributes={"yovision.material_id": str(session.material_id)},
    )


def _new_material(
    material_id: uuid.UUID,
    owner: str,
    title: str,
    mode: UploadMode,
    stored: StoredFile,
    content_type: str | None,
) -> NewMaterial:
    return NewMaterial(
        material_id, owner, title, mode, stored.key, stored.size_bytes, stored.sha256, content_type
    )
