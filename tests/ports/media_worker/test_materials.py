"""The material store: what is recorded reads back, and each status change does exactly what its use case
relies on."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from media_worker.domain.material import MaterialStatus, UploadMode
from tests.ports.media_worker.conftest import Backend, BackendContract, InMemory, OnPostgres
from tests.ports.media_worker.records import OWNER, new_material, outputs_of


class MaterialStoreContract(BackendContract):
    async def _added(self, backend: Backend, status: MaterialStatus = MaterialStatus.PENDING) -> uuid.UUID:
        material = new_material()
        async with backend.uow() as uow:
            await uow.materials.add(material)
            if status != MaterialStatus.PENDING:
                await uow.materials.set_processing(material.material_id)
            if status == MaterialStatus.FAILED:
                await uow.materials.fail(material.material_id, "ffmpeg_failed")
            if status == MaterialStatus.DONE:
                await uow.materials.complete(
                    material.material_id, outputs_of(material.material_id, uuid.uuid4())
                )
        return material.material_id

    async def test_a_recorded_material_reads_back_pending_and_protected(self, backend: Backend) -> None:
        new = new_material(content_type=None)
        async with backend.uow() as uow:
            await uow.materials.add(new)
        async with backend.uow() as uow:
            material = await uow.materials.get(new.material_id, OWNER)
        assert material is not None
        assert (material.material_id, material.owner, material.title, material.upload_mode) == (
            new.material_id,
            OWNER,
            "clip",
            UploadMode.CHUNKED,
        )
        assert (material.source_key, material.size_bytes, material.sha256, material.content_type) == (
            new.source_key,
            2500,
            "ab" * 32,
            None,
        )
        assert (material.status, material.progress, material.error_code, dict(material.outputs)) == (
            MaterialStatus.PENDING,
            0,
            None,
            {},
        )
        assert material.protection_until - material.created_at == timedelta(days=15)
        assert material.created_at < material.read_at < material.protection_until
        assert material.shown_source_key is None

    async def test_another_owner_and_an_unknown_id_read_nothing(self, backend: Backend) -> None:
        material_id = await self._added(backend)
        async with backend.uow() as uow:
            assert await uow.materials.get(material_id, "user-2") is None
            assert await uow.materials.get(uuid.uuid4(), OWNER) is None

    async def test_processing_starts_at_zero_without_an_error(self, backend: Backend) -> None:
        material_id = await self._added(backend, MaterialStatus.FAILED)
        async with backend.uow() as uow:
            material = await uow.materials.set_processing(material_id)
        assert (material.status, material.progress, material.error_code) == (
            MaterialStatus.PROCESSING,
            0,
            None,
        )

    async def test_progress_only_rises_and_only_while_processing(self, backend: Backend) -> None:
        pending = await self._added(backend)
        processing = await self._added(backend, MaterialStatus.PROCESSING)
        async with backend.uow() as uow:
            await uow.materials.raise_progress(processing, 70)
            await uow.materials.raise_progress(processing, 10)
            await uow.materials.raise_progress(pending, 50)
        async with backend.uow() as uow:
            assert (await uow.materials.lock(processing)).progress == 70
            assert (await uow.materials.lock(pending)).progress == 0

    async def test_completion_fills_only_outputs_still_empty(self, backend: Backend) -> None:
        material_id = await self._added(backend, MaterialStatus.PROCESSING)
        first, second = outputs_of(material_id, uuid.uuid4()), outputs_of(material_id, uuid.uuid4())
        async with backend.uow() as uow:
            await uow.materials.complete(material_id, first)
        async with backend.uow() as uow:
            await uow.materials.complete(material_id, second)
        async with backend.uow() as uow:
            material = await uow.materials.get(material_id, OWNER)
        assert material is not None
        assert (material.status, material.progress, material.error_code) == (MaterialStatus.DONE, 100, None)
        assert dict(material.outputs) == first

    async def test_a_failure_keeps_its_code(self, backend: Backend) -> None:
        material_id = await self._added(backend, MaterialStatus.FAILED)
        async with backend.uow() as uow:
            material = await uow.materials.lock(material_id)
        assert (material.status, material.error_code) == (MaterialStatus.FAILED, "ffmpeg_failed")

    @pytest.mark.parametrize(
        ("status", "after"),
        [
            (MaterialStatus.PROCESSING, MaterialStatus.PENDING),
            (MaterialStatus.PENDING, MaterialStatus.PENDING),
            (MaterialStatus.DONE, MaterialStatus.DONE),
            (MaterialStatus.FAILED, MaterialStatus.FAILED),
        ],
    )
    async def test_back_to_pending_only_from_processing(
        self, backend: Backend, status: MaterialStatus, after: MaterialStatus
    ) -> None:
        material_id = await self._added(backend, status)
        async with backend.uow() as uow:
            await uow.materials.back_to_pending(material_id)
        async with backend.uow() as uow:
            assert (await uow.materials.lock(material_id)).status == after

    async def test_only_the_owners_failed_material_is_reset(self, backend: Backend) -> None:
        failed = await self._added(backend, MaterialStatus.FAILED)
        done = await self._added(backend, MaterialStatus.DONE)
        async with backend.uow() as uow:
            assert await uow.materials.reset_failed(failed, "user-2") is False
            assert await uow.materials.reset_failed(done, OWNER) is False
            assert await uow.materials.reset_failed(uuid.uuid4(), OWNER) is False
            assert await uow.materials.reset_failed(failed, OWNER) is True
        async with backend.uow() as uow:
            material = await uow.materials.lock(failed)
            assert (material.status, material.progress, material.error_code) == (
                MaterialStatus.PENDING,
                0,
                None,
            )
            assert await uow.materials.reset_failed(failed, OWNER) is False


class TestPostgresMaterialStore(OnPostgres, MaterialStoreContract):
    pass


class TestMemoryMaterialStore(InMemory, MaterialStoreContract):
    pass
