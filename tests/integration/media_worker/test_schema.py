"""The media schema's runtime role: least privilege, and the protection window enforced by the table."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from tests.support.media_worker_fixtures import Media


async def insert_material(conn: asyncpg.Connection, schema: str, **extra: object) -> uuid.UUID:
    material_id = uuid.uuid4()
    columns = ["id", "owner_subject", "upload_mode", "source_path", "size_bytes", "sha256", *extra]
    values = [material_id, "user-1", "multipart", "sources/x/source", 10, "00", *extra.values()]
    placeholders = ", ".join(f"${i}" for i in range(1, len(values) + 1))
    await conn.execute(
        f'INSERT INTO "{schema}".materials ({", ".join(columns)}) VALUES ({placeholders})', *values
    )
    return material_id


async def test_protection_until_is_creation_plus_15_days(media: Media) -> None:
    async with media.pool.acquire() as conn:
        material_id = await insert_material(conn, media.schema)
        row = await conn.fetchrow(
            f'SELECT protection_until - created_at AS window FROM "{media.schema}".materials WHERE id = $1',
            material_id,
        )
        assert row is not None
        assert row["window"].days == 15
        with pytest.raises(asyncpg.CheckViolationError):
            await insert_material(conn, media.schema, protection_until=datetime.now(UTC) + timedelta(days=1))


@pytest.mark.parametrize(
    "statement",
    [
        'DELETE FROM "{s}".materials',
        "UPDATE \"{s}\".materials SET source_path = 'elsewhere'",
        "UPDATE \"{s}\".materials SET owner_subject = 'someone'",
        'DELETE FROM "{s}".transcode_jobs',
        'DELETE FROM "{s}".upload_sessions',
        'TRUNCATE "{s}".materials',
        'CREATE TABLE "{s}".extra (id int)',
    ],
)
async def test_the_runtime_role_cannot_delete_or_move_sources(media: Media, statement: str) -> None:
    async with media.pool.acquire() as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(statement.replace("{s}", media.schema))
