"""The PostgreSQL stores of the media schema and their unit of work. Every store works on the connection
(and transaction) of the unit of work it was bound to.

Job writes after the claim are fenced: they match the row only while the caller's lease (owner, token,
DB-clock expiry) is current, and raise `LeaseLost` otherwise, so a stale worker writes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

import asyncpg

from media_worker.domain.layout import ChunkLayout
from media_worker.domain.material import Material, MaterialStatus, NewMaterial, UploadMode
from media_worker.domain.sessions import SessionState, UploadSession
from media_worker.service_layer.ports import ClaimedJob, HeldLease
from yovision_platform.errors import LeaseLost
from yovision_platform.storage import DbConnection, Identifier, Lease, LeaseTable

__all__ = [
    "OUTPUT_COLUMNS",
    "MediaTables",
    "PostgresInstances",
    "PostgresJobs",
    "PostgresMaterials",
    "PostgresSessions",
    "material_of",
]

Row = asyncpg.Record
OUTPUT_COLUMNS = {"cover": "cover_ref", "preview_720p": "preview_ref", "clip_10s": "clip_ref"}


class MediaTables:
    """The qualified names of the media schema's tables."""

    def __init__(self, schema: Identifier) -> None:
        self.schema = schema
        q = schema.quoted
        self.materials, self.sessions = f"{q}.materials", f"{q}.upload_sessions"
        self.jobs, self.instances = f"{q}.transcode_jobs", f"{q}.instances"
        self.job_leases = LeaseTable(schema, Identifier("transcode_jobs"))


def material_of(row: Row) -> Material:
    """A material row read with `now() AS db_now`."""
    return Material(
        material_id=row["id"],
        owner=row["owner_subject"],
        title=row["title"],
        upload_mode=UploadMode(row["upload_mode"]),
        source_key=row["source_path"],
        size_bytes=row["size_bytes"],
        sha256=row["sha256"],
        content_type=row["content_type"],
        status=MaterialStatus(row["status"]),
        progress=row["progress"],
        error_code=row["error_code"],
        outputs={kind: row[column] for kind, column in OUTPUT_COLUMNS.items() if row[column] is not None},
        created_at=row["created_at"],
        protection_until=row["protection_until"],
        read_at=row["db_now"],
    )


def _session_of(row: Row) -> UploadSession:
    return UploadSession(
        session_id=row["id"],
        owner=row["owner_subject"],
        upload_key=row["upload_key"],
        layout=ChunkLayout(row["total_bytes"], row["chunk_bytes"]),
        material_id=row["material_id"],
        title=row["title"],
        content_type=row["content_type"],
        received=frozenset(row["received"]),
        state=SessionState(row["state"]),
        trace_parent=row["trace_parent"],
    )


class PostgresMaterials:
    def __init__(self, conn: DbConnection, tables: MediaTables) -> None:
        self._conn = conn
        self._table = tables.materials

    async def _updated(self, sql: str, *args: object) -> Material:
        row = await self._conn.fetchrow(sql, *args)
        assert row is not None, "no such material"
        return material_of(row)

    async def add(self, material: NewMaterial) -> None:
        await self._conn.execute(
            f"""INSERT INTO {self._table}
                  (id, owner_subject, title, upload_mode, source_path, size_bytes, sha256, content_type)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8)""",
            material.material_id,
            material.owner,
            material.title,
            material.upload_mode.value,
            material.source_key,
            material.size_bytes,
            material.sha256,
            material.content_type,
        )

    async def get(self, material_id: uuid.UUID, owner: str) -> Material | None:
        row = await self._conn.fetchrow(
            f"SELECT m.*, now() AS db_now FROM {self._table} m WHERE m.id = $1 AND m.owner_subject = $2",
            material_id,
            owner,
        )
        return material_of(row) if row is not None else None

    async def lock(self, material_id: uuid.UUID) -> Material:
        return await self._updated(
            f"SELECT m.*, now() AS db_now FROM {self._table} m WHERE m.id = $1 FOR UPDATE", material_id
        )

    async def set_processing(self, material_id: uuid.UUID) -> Material:
        return await self._updated(
            f"""UPDATE {self._table} SET status = 'processing', progress = 0, error_code = NULL,
                       updated_at = now()
                 WHERE id = $1 RETURNING *, now() AS db_now""",
            material_id,
        )

    async def raise_progress(self, material_id: uuid.UUID, progress: int) -> None:
        await self._conn.execute(
            f"""UPDATE {self._table} SET progress = GREATEST(progress, $2), updated_at = now()
                 WHERE id = $1 AND status = 'processing'""",
            material_id,
            progress,
        )

    async def complete(self, material_id: uuid.UUID, outputs: Mapping[str, str]) -> None:
        await self._conn.execute(
            f"""UPDATE {self._table}
                   SET status = 'done', progress = 100, error_code = NULL, updated_at = now(),
                       cover_ref = COALESCE(cover_ref, $2), preview_ref = COALESCE(preview_ref, $3),
                       clip_ref = COALESCE(clip_ref, $4)
                 WHERE id = $1""",
            material_id,
            outputs["cover"],
            outputs["preview_720p"],
            outputs["clip_10s"],
        )

    async def fail(self, material_id: uuid.UUID, error_code: str) -> None:
        await self._conn.execute(
            f"UPDATE {self._table} SET status = 'failed', error_code = $2, updated_at = now() WHERE id = $1",
            material_id,
            error_code,
        )

    async def back_to_pending(self, material_id: uuid.UUID) -> None:
        await self._conn.execute(
            f"""UPDATE {self._table} SET status = 'pending', updated_at = now()
                 WHERE id = $1 AND status = 'processing'""",
            material_id,
        )

    async def reset_failed(self, material_id: uuid.UUID, owner: str) -> bool:
        status = await self._conn.execute(
            f"""UPDATE {self._table}
                   SET status = 'pending', progress = 0, error_code = NULL, updated_at = now()
                 WHERE id = $1 AND owner_subject = $2 AND status = 'failed'""",
            material_id,
            owner,
        )
        return bool(status == "UPDATE 1")


class PostgresSessions:
    def __init__(self, conn: DbConnection, tables: MediaTables) -> None:
        self._conn = conn
        self._table = tables.sessions

    async def _one(self, sql: str, *args: object) -> UploadSession | None:
        row = await self._conn.fetchrow(sql, *args)
        return _session_of(row) if row is not None else None

    async def find(self, owner: str, upload_key: str) -> UploadSession | None:
        return await self._one(
            f"SELECT * FROM {self._table} WHERE owner_subject = $1 AND upload_key = $2", owner, upload_key
        )

    async def get(self, session_id: uuid.UUID, owner: str) -> UploadSession | None:
        return await self._one(
            f"SELECT * FROM {self._table} WHERE id = $1 AND owner_subject = $2", session_id, owner
        )

    async def add(self, session: UploadSession) -> UploadSession | None:
        return await self._one(
            f"""INSERT INTO {self._table}
                  (id, owner_subject, upload_key, title, content_type, total_bytes, chunk_bytes, chunk_count,
                   material_id, trace_parent)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                ON CONFLICT (owner_subject, upload_key) DO NOTHING RETURNING *""",
            session.session_id,
            session.owner,
            session.upload_key,
            session.title,
            session.content_type,
            session.layout.total_bytes,
            session.layout.chunk_bytes,
            session.layout.chunk_count,
            session.material_id,
            session.trace_parent,
        )

    async def add_received(self, session_id: uuid.UUID, index: int) -> None:
        await self._conn.execute(
            f"""UPDATE {self._table}
                   SET received = (SELECT array_agg(DISTINCT x ORDER BY x)
                                     FROM unnest(received || $2::int) x),
                       updated_at = now()
                 WHERE id = $1 AND state = 'open'""",
            session_id,
            index,
        )

    async def begin_merge(
        self, session_id: uuid.UUID, owner: str, instance_id: str, stale_seconds: float
    ) -> UploadSession | None:
        return await self._one(
            f"""UPDATE {self._table}
                   SET state = 'merging', merge_owner = $3, merge_started_at = now(), updated_at = now()
                 WHERE id = $1 AND owner_subject = $2
                   AND (state = 'open'
                        OR (state = 'merging' AND merge_started_at < now() - make_interval(secs => $4)))
             RETURNING *""",
            session_id,
            owner,
            instance_id,
            float(stale_seconds),
        )

    async def finish_merge(self, session_id: uuid.UUID, merged_key: str) -> None:
        await self._conn.execute(
            f"""UPDATE {self._table} SET state = 'completed', merged_path = $2, updated_at = now()
                 WHERE id = $1 AND state = 'merging'""",
            session_id,
            merged_key,
        )

    async def abort_merge(self, session_id: uuid.UUID) -> None:
        await self._conn.execute(
            f"""UPDATE {self._table} SET state = 'open', merge_owner = NULL, merge_started_at = NULL,
                       updated_at = now()
                 WHERE id = $1 AND state = 'merging'""",
            session_id,
        )


class PostgresJobs:
    def __init__(self, conn: DbConnection, tables: MediaTables) -> None:
        self._conn = conn
        self._table = tables.jobs
        self._materials = tables.materials
        self._leases = tables.job_leases

    async def add(self, material_id: uuid.UUID, *, trace_parent: str | None = None) -> uuid.UUID:
        job_id = uuid.uuid4()
        await self._conn.execute(
            f"INSERT INTO {self._table} (id, material_id, trace_parent) VALUES ($1, $2, $3)",
            job_id,
            material_id,
            trace_parent,
        )
        return job_id

    async def claim(self, owner: str, lease_seconds: float) -> ClaimedJob | None:
        claimed = await self._leases.claim(
            self._conn,
            owner,
            lease_seconds=lease_seconds,
            limit=1,
            due_condition="state IN ('pending', 'running')",
            order_by="created_at",
            returning=("material_id", "trace_parent"),
        )
        if not claimed:
            return None
        row = claimed[0].row
        return ClaimedJob(claimed[0].row_id, row["material_id"], claimed[0].lease, row["trace_parent"])

    async def start(self, job_id: uuid.UUID, lease: Lease) -> int:
        attempt = await self._conn.fetchval(
            f"""UPDATE {self._table} SET state = 'running', attempt = attempt + 1, heartbeat_at = now(),
                       updated_at = now()
                 WHERE id = $1 AND lease_owner = $2 AND lease_token = $3 AND lease_expires_at > now()
             RETURNING attempt""",
            job_id,
            lease.owner,
            lease.token,
        )
        if attempt is None:
            raise LeaseLost()
        return int(attempt)

    async def renew(self, job_id: uuid.UUID, lease: Lease, lease_seconds: float) -> None:
        status = await self._conn.execute(
            f"""UPDATE {self._table}
                   SET lease_expires_at = now() + make_interval(secs => $4), heartbeat_at = now()
                 WHERE id = $1 AND lease_owner = $2 AND lease_token = $3 AND lease_expires_at > now()""",
            job_id,
            lease.owner,
            lease.token,
            float(lease_seconds),
        )
        if status != "UPDATE 1":
            raise LeaseLost()

    async def finish(
        self, job_id: uuid.UUID, lease: Lease, *, state: str, error_code: str | None = None
    ) -> None:
        await self._leases.fenced_update(
            self._conn, job_id, lease, {"state": state, "error_code": error_code}, release=True
        )

    async def release(self, job_id: uuid.UUID, lease: Lease) -> None:
        await self._leases.fenced_update(self._conn, job_id, lease, {"state": "pending"}, release=True)

    async def reset_failed(self, material_id: uuid.UUID) -> None:
        await self._conn.execute(
            f"""UPDATE {self._table} SET state = 'pending', error_code = NULL, updated_at = now()
                 WHERE material_id = $1 AND state = 'failed'""",
            material_id,
        )

    async def next_lease_expiry_in(self) -> float | None:
        seconds = await self._conn.fetchval(
            f"""SELECT extract(epoch FROM min(lease_expires_at) - now())::float8 FROM {self._table}
                 WHERE state IN ('pending', 'running') AND lease_expires_at > now()"""
        )
        return None if seconds is None else float(seconds)

    async def leases_of(self, owner: str) -> list[HeldLease]:
        rows = await self._conn.fetch(
            f"""SELECT id, material_id, lease_token FROM {self._table}
                 WHERE lease_owner = $1 AND state = 'running' AND lease_expires_at > now()
                 ORDER BY created_at, id""",
            owner,
        )
        return [HeldLease(r["id"], r["material_id"], r["lease_token"]) for r in rows]

    async def release_dead_lease(self, job_id: uuid.UUID, owner: str, token: uuid.UUID) -> bool:
        status = await self._conn.execute(
            f"""UPDATE {self._table} SET state = 'pending', lease_owner = NULL, lease_token = NULL,
                       lease_expires_at = NULL, updated_at = now()
                 WHERE id = $1 AND lease_owner = $2 AND lease_token = $3 AND state = 'running'""",
            job_id,
            owner,
            token,
        )
        return bool(status == "UPDATE 1")

    async def live_tokens(
        self, tokens: Sequence[uuid.UUID], material_ids: Sequence[uuid.UUID] = ()
    ) -> set[uuid.UUID]:
        rows = await self._conn.fetch(
            f"""SELECT lease_token::text AS token FROM {self._table} WHERE lease_token = ANY($1::uuid[])
                UNION
                SELECT split_part(r.ref, '/', 3) FROM {self._materials} m,
                       LATERAL (VALUES (m.cover_ref), (m.preview_ref), (m.clip_ref)) AS r(ref)
                 WHERE m.id = ANY($2::uuid[]) AND r.ref IS NOT NULL""",
            list(tokens),
            list(material_ids),
        )
        live: set[uuid.UUID] = set()
        for row in rows:
            try:
                live.add(uuid.UUID(row["token"]))
            except ValueError:
                continue  # a reference of another shape names no attempt
        return live


class PostgresInstances:
    def __init__(self, conn: DbConnection, tables: MediaTables) -> None:
        self._conn = conn
        self._table = tables.instances

    async def register(self, instance_id: str) -> None:
        await self._conn.execute(
            f"""INSERT INTO {self._table} (instance_id) VALUES ($1)
                ON CONFLICT (instance_id) DO UPDATE SET seen_at = now(), draining = false""",
            instance_id,
        )

    async def set_draining(self, instance_id: str) -> None:
        await self._conn.execute(
            f"""INSERT INTO {self._table} (instance_id, draining) VALUES ($1, true)
                ON CONFLICT (instance_id) DO UPDATE SET draining = true, seen_at = now()""",
            instance_id,
        )
