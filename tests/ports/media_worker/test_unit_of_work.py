"""media-worker's unit of work: the writes of every store and the events commit together or not at all."""

from __future__ import annotations

import uuid

import pytest

from media_worker.domain.material import NewMaterial
from media_worker.domain.sessions import SessionState, UploadSession
from tests.ports.media_worker.conftest import Backend, BackendContract, InMemory, OnPostgres
from tests.ports.media_worker.records import OWNER, new_material, new_session
from yovision_platform.messaging import OutboxMessage


class Failure(Exception):
    pass


def announcement() -> OutboxMessage:
    return OutboxMessage(
        event_id=uuid.uuid4(), event_type="MaterialUploaded", topic="media.material.v1", key=b"m", value=b"{}"
    )


class MediaUnitOfWorkContract(BackendContract):
    async def _record(self, backend: Backend, *, then_fail: bool) -> tuple[NewMaterial, UploadSession]:
        material, session = new_material(), new_session()
        async with backend.uow() as uow:
            await uow.sessions.add(session)
            assert await uow.sessions.begin_merge(session.session_id, OWNER, "media-a", 900.0)
            await uow.materials.add(material)
            await uow.jobs.add(material.material_id)
            await uow.sessions.finish_merge(session.session_id, material.source_key)
            await uow.instances.register("media-a")
            await uow.outbox.enqueue(announcement())
            if then_fail:
                raise Failure
        return material, session

    async def test_a_normal_exit_commits_every_store_and_the_event(self, backend: Backend) -> None:
        material, session = await self._record(backend, then_fail=False)
        async with backend.uow() as uow:
            assert await uow.materials.get(material.material_id, OWNER) is not None
            stored = await uow.sessions.get(session.session_id, OWNER)
            assert stored is not None and stored.state == SessionState.COMPLETED
            assert await uow.jobs.claim("media-a", 60.0) is not None
            assert [i.instance_id for i in await uow.listing.instances(10)] == ["media-a"]
        assert await backend.committed_events() == ["MaterialUploaded"]

    async def test_an_exception_rolls_back_every_store_and_the_event(self, backend: Backend) -> None:
        with pytest.raises(Failure):
            await self._record(backend, then_fail=True)
        async with backend.uow() as uow:
            assert await uow.listing.materials(OWNER, 10, None) == []
            assert await uow.sessions.find(OWNER, "k1") is None
            assert await uow.jobs.claim("media-a", 60.0) is None
            assert await uow.listing.instances(10) == []
        assert await backend.committed_events() == []


class TestPostgresMediaUnitOfWork(OnPostgres, MediaUnitOfWorkContract):
    pass


class TestMemoryMediaUnitOfWork(InMemory, MediaUnitOfWorkContract):
    pass
