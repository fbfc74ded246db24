"""The upload session store: one session per owner and upload key, the chunks received, and the merge guard
(open -> merging -> completed, or back to open)."""

from __future__ import annotations

import uuid

from media_worker.domain.sessions import SessionState, UploadSession
from tests.ports.media_worker.conftest import Backend, BackendContract, InMemory, OnPostgres
from tests.ports.media_worker.records import OWNER, new_session

INSTANCE = "media-a"
STALE_SECONDS = 900.0


class SessionStoreContract(BackendContract):
    async def _added(self, backend: Backend, session: UploadSession | None = None) -> UploadSession:
        async with backend.uow() as uow:
            added = await uow.sessions.add(session or new_session())
        assert added is not None
        return added

    async def _state(self, backend: Backend, session: UploadSession) -> SessionState:
        async with backend.uow() as uow:
            found = await uow.sessions.get(session.session_id, session.owner)
        assert found is not None
        return found.state

    async def test_an_added_session_is_open_and_found_by_id_and_by_key(self, backend: Backend) -> None:
        session = new_session()
        added = await self._added(backend, session)
        assert added == session
        assert (added.state, added.received, added.missing) == (SessionState.OPEN, frozenset(), [0, 1, 2])
        async with backend.uow() as uow:
            assert await uow.sessions.get(session.session_id, OWNER) == session
            assert await uow.sessions.find(OWNER, "k1") == session
            assert await uow.sessions.get(session.session_id, "user-2") is None
            assert await uow.sessions.find("user-2", "k1") is None
            assert await uow.sessions.get(uuid.uuid4(), OWNER) is None

    async def test_a_second_session_of_one_owner_and_key_is_not_added(self, backend: Backend) -> None:
        first = await self._added(backend)
        async with backend.uow() as uow:
            assert await uow.sessions.add(new_session(chunk_bytes=500)) is None
            other_owner = await uow.sessions.add(new_session("user-2"))
            other_key = await uow.sessions.add(new_session(upload_key="k2"))
        assert other_owner is not None and other_key is not None
        async with backend.uow() as uow:
            assert await uow.sessions.find(OWNER, "k1") == first

    async def test_received_chunks_are_a_set(self, backend: Backend) -> None:
        session = await self._added(backend)
        for index in (2, 0, 2):
            async with backend.uow() as uow:
                await uow.sessions.add_received(session.session_id, index)
        async with backend.uow() as uow:
            found = await uow.sessions.get(session.session_id, OWNER)
        assert found is not None
        assert (found.received, found.missing) == (frozenset({0, 2}), [1])

    async def test_one_merge_at_a_time_and_only_of_an_open_session(self, backend: Backend) -> None:
        session = await self._added(backend)
        async with backend.uow() as uow:
            assert (
                await uow.sessions.begin_merge(session.session_id, "user-2", INSTANCE, STALE_SECONDS) is None
            )
            merging = await uow.sessions.begin_merge(session.session_id, OWNER, INSTANCE, STALE_SECONDS)
        assert merging is not None and merging.state == SessionState.MERGING
        assert (merging.title, merging.content_type, merging.material_id) == (
            session.title,
            session.content_type,
            session.material_id,
        )
        async with backend.uow() as uow:
            assert await uow.sessions.begin_merge(session.session_id, OWNER, "media-b", STALE_SECONDS) is None
            await uow.sessions.add_received(session.session_id, 1)  # not open: ignored
        assert await self._state(backend, session) == SessionState.MERGING
        async with backend.uow() as uow:
            found = await uow.sessions.get(session.session_id, OWNER)
        assert found is not None and found.received == frozenset()

    async def test_a_merge_abandoned_for_the_stale_time_is_taken_over(self, backend: Backend) -> None:
        session = await self._added(backend)
        async with backend.uow() as uow:
            assert await uow.sessions.begin_merge(session.session_id, OWNER, INSTANCE, STALE_SECONDS)
        async with backend.uow() as uow:
            again = await uow.sessions.begin_merge(session.session_id, OWNER, "media-b", 0.0)
        assert again is not None and again.state == SessionState.MERGING

    async def test_a_finished_merge_completes_the_session_for_good(self, backend: Backend) -> None:
        session = await self._added(backend)
        async with backend.uow() as uow:
            await uow.sessions.finish_merge(session.session_id, "sources/x/source")  # not merging: ignored
        assert await self._state(backend, session) == SessionState.OPEN
        async with backend.uow() as uow:
            assert await uow.sessions.begin_merge(session.session_id, OWNER, INSTANCE, STALE_SECONDS)
            await uow.sessions.finish_merge(session.session_id, "sources/x/source")
        assert await self._state(backend, session) == SessionState.COMPLETED
        async with backend.uow() as uow:
            assert await uow.sessions.begin_merge(session.session_id, OWNER, INSTANCE, 0.0) is None
            await uow.sessions.abort_merge(session.session_id)
        assert await self._state(backend, session) == SessionState.COMPLETED

    async def test_an_aborted_merge_reopens_the_session(self, backend: Backend) -> None:
        session = await self._added(backend)
        async with backend.uow() as uow:
            assert await uow.sessions.begin_merge(session.session_id, OWNER, INSTANCE, STALE_SECONDS)
            await uow.sessions.abort_merge(session.session_id)
        assert await self._state(backend, session) == SessionState.OPEN
        async with backend.uow() as uow:
            assert await uow.sessions.begin_merge(session.session_id, OWNER, INSTANCE, STALE_SECONDS)


class TestPostgresSessionStore(OnPostgres, SessionStoreContract):
    pass


class TestMemorySessionStore(InMemory, SessionStoreContract):
    pass
