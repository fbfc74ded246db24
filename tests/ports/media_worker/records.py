"""Records the media contract suites (and the use-case tests) store through the ports."""

from __future__ import annotations

import uuid

from media_worker.domain.layout import ChunkLayout
from media_worker.domain.material import NewMaterial, UploadMode
from media_worker.domain.outputs import OUTPUTS
from media_worker.domain.sessions import UploadSession
from media_worker.service_layer.ports import UnitOfWorkFactory

OWNER = "user-1"


def new_material(
    owner: str = OWNER, *, title: str = "clip", content_type: str | None = "video/mp4"
) -> NewMaterial:
    material_id = uuid.uuid4()
    return NewMaterial(
        material_id,
        owner,
        title,
        UploadMode.CHUNKED,
        f"sources/{material_id}/source",
        2500,
        "ab" * 32,
        content_type,
    )


def new_session(
    owner: str = OWNER, upload_key: str = "k1", *, total_bytes: int = 2500, chunk_bytes: int = 1000
) -> UploadSession:
    layout = ChunkLayout(total_bytes, chunk_bytes)
    return UploadSession(uuid.uuid4(), owner, upload_key, layout, uuid.uuid4(), "title", "video/mp4")


def outputs_of(material_id: uuid.UUID, token: uuid.UUID) -> dict[str, str]:
    return {output.kind: f"outputs/{material_id}/{token}/{output.file_name}" for output in OUTPUTS}


async def add_material(uow: UnitOfWorkFactory, owner: str = OWNER) -> uuid.UUID:
    """A material and its pending job, as an upload records them."""
    material = new_material(owner)
    async with uow() as tx:
        await tx.materials.add(material)
        await tx.jobs.add(material.material_id)
    return material.material_id
