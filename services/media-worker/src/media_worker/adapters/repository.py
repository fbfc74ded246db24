"""SQL of the media schema. Every function takes the connection (and transaction) of its caller.

Job writes after the claim are fenced: they match the row only while the caller's lease (owner, token,
DB-clock expiry) is current, and raise `LeaseLost` otherwise, so a stale worker writes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from yovision_platform.db import DbConnection, Identifier
from yovision_platform.errors import LeaseLost
from yovision_platform.leases import ClaimedRow, Lease, LeaseTable

__all__ = ["MediaRepository"]

Row = Mapping[str, Any]


class MediaRepository:
    def __init__(self, schema: Identifier) -> None:
        self.schema = schema
        q = schema.quoted
        self.materials = f"{q}.materials"
        self.sessions = f"{q}.upload_sessions"
        self.jobs = f"{q}.transcode_jobs"
        self.instances = f"{q}.instances"
        self.job_leases = LeaseTable(schema, Identifier("transcode_jobs"))

    # materials -------------------------------------------------------------------------------------
    async def create_material(
        self,
        conn: DbConnection,
        *,
        material_id: uuid.UUID,
        owner: str,
        title: str,
        upload_mode: str,
        source_key: str,
        size_bytes: int,
        sha256: str,
        content_type: str | None,
    ) -> uuid.UUID:
        """Insert the material and its transcode job; returns the job id. Caller's transaction."""
        await conn.execute(
            f"""INSERT INTO {self.materials}
                  (id, owner_subject, title, upload_mode, source_path, size_bytes, sha256, content_type)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8)""",
            material_id,
            owner,
            title,
            upload_mode,
            source_key,
            size_bytes,
            sha256,
            content_type,
        )
        job_id = uuid.uuid4()
        await conn.execute(f"INSERT INTO {self.jobs} (id, material_id) VALUES ($1, $2)", job_id, material_id)
        return job_id

    async def get_material(self, conn: DbConnection, material_id: uuid.UUID, owner: str | None) -> Row | None:
        row = await conn.fetchrow(
            f"""SELECT m.*, now() AS db_now FROM {self.materials} m
                 WHERE m.id = $1 AND ($2::text IS NULL OR m.owner_subject = $2)""",
            material_id,
            owner,
        )
        return dict(row) if row is not None else None

    async def retry_failed(self, conn: DbConnection, material_id: uuid.UUID, owner: str) -> bool:
        """failed -> pending for the material and its job; False when the material is not failed."""
        status = await conn.execute(
            f"""UPDATE {self.materials}
                   SET status = 'pending', progress = 0, error_code = NULL, updated_at = now()
                 WHERE id = $1 AND owner_subject = $2 AND status = 'failed'""",
            material_id,
            owner,
        )
        if status != "UPDATE 1":
            return False
        await conn.execute(
            f"""UPDATE {self.jobs} SET state = 'pending', error_code = NULL, updated_at = now()
                 WHERE material_id = $1 AND state = 'failed'""",
            material_id,
        )
        return True

    # upload sessions -------------------------------------------------------------------------------
    async def find_session(self, conn: DbConnection, owner: str, upload_key: str) -> Row | None:
        row = await conn.fetchrow(
            f"SELECT * FROM {self.sessions} WHERE owner_subject = $1 AND upload_key = $2", owner, upload_key
        )
        return dict(row) if row is not None else None

    async def get_session(self, conn: DbConnection, session_id: uuid.UUID, owner: str) -> Row | None:
        row = await conn.fetchrow(
            f"SELECT * FROM {self.sessions} WHERE id = $1 AND owner_subject = $2", session_id, owner
        )
        return dict(row) if row is not None else None

    async def insert_session(self, conn: DbConnection, values: Mapping[str, object]) -> Row | None:
        """Insert a session; None when (owner, upload_key) already exists (a concurrent init)."""
        columns = list(values)
        placeholders = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
        row = await conn.fetchrow(
            f"""INSERT INTO {self.sessions} ({", ".join(columns)}) VALUES ({placeholders})
                ON CONFLICT (owner_subject, upload_key) DO NOTHING RETURNING *""",
            *values.values(),
        )
        return dict(row) if row is not None else None

    async def add_received(self, conn: DbConnection, session_id: uuid.UUID, index: int) -> None:
        await conn.execute(
            f"""UPDATE {self.sessions}
                   SET received = (SELECT array_agg(DISTINCT x ORDER BY x)
                                     FROM unnest(received || $2::int) x),
                       updated_at = now()
                 WHERE id = $1 AND state = 'open'""",
            session_id,
            index,
        )

    async def begin_merge(
        self, conn: DbConnection, session_id: uuid.UUID, owner: str, instance_id: str, stale_seconds: float
    ) -> Row | None:
        """DB guard of the merge slot: open (or a merge abandoned for `stale_seconds`) -> merging."""
        row = await conn.fetchrow(
            f"""UPDATE {self.sessions}
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
        return dict(row) if row is not None else None

    async def finish_merge(self, conn: DbConnection, session_id: uuid.UUID, merged_key: str) -> None:
        await conn.execute(
            f"""UPDATE {self.sessions} SET state = 'completed', merged_path = $2, updated_at = now()
                 WHERE id = $1 AND state = 'merging'""",
            session_id,
            merged_key,
        )

    async def abort_merge(self, conn: DbConnection, session_id: uuid.UUID) -> None:
        await conn.execute(
            f"""UPDATE {self.sessions} SET state = 'open', merge_owner = NULL, merge_started_at = NULL,
                       updated_at = now()
                 WHERE id = $1 AND state = 'merging'""",
            session_id,
        )

    # transcode jobs --------------------------------------------------------------------------------
    async def claim_job(self, conn: DbConnection, owner: str, lease_seconds: float) -> ClaimedRow | None:
        """One due job: pending, or running with an expired lease (its executor died or stalled)."""
        claimed = await self.job_leases.claim(
            conn,
            owner,
            lease_seconds=lease_seconds,
            limit=1,
            due_condition="state IN ('pending', 'running')",
            order_by="created_at",
            returning=("material_id", "attempt"),
        )
        return claimed[0] if claimed else None

    async def start_job(self, conn: DbConnection, claimed: ClaimedRow) -> tuple[int, Row]:
        """Fenced: the job becomes running with the next attempt number, the material processing."""
        attempt = await conn.fetchval(
            f"""UPDATE {self.jobs} SET state = 'running', attempt = attempt + 1, heartbeat_at = now(),
                       updated_at = now()
                 WHERE id = $1 AND lease_owner = $2 AND lease_token = $3 AND lease_expires_at > now()
             RETURNING attempt""",
            claimed.row_id,
            claimed.lease.owner,
            claimed.lease.token,
        )
        if attempt is None:
            raise LeaseLost()
        material = await conn.fetchrow(
            f"""UPDATE {self.materials} SET status = 'processing', progress = 0, error_code = NULL,
                       updated_at = now()
                 WHERE id = $1 RETURNING *""",
            claimed.row["material_id"],
        )
        assert material is not None
        return int(attempt), dict(material)

    async def heartbeat(
        self, conn: DbConnection, job_id: uuid.UUID, lease: Lease, lease_seconds: float, progress: int
    ) -> None:
        """Fenced renewal plus progress; LeaseLost when the lease is no longer ours."""
        async with conn.transaction():
            status = await conn.execute(
                f"""UPDATE {self.jobs}
                       SET lease_expires_at = now() + make_interval(secs => $4), heartbeat_at = now()
                     WHERE id = $1 AND lease_owner = $2 AND lease_token = $3 AND lease_expires_at > now()""",
                job_id,
                lease.owner,
                lease.token,
                float(lease_seconds),
            )
            if status != "UPDATE 1":
                raise LeaseLost()
            await conn.execute(
                f"""UPDATE {self.materials} SET progress = GREATEST(progress, $2), updated_at = now()
                     WHERE id = (SELECT material_id FROM {self.jobs} WHERE id = $1)
                       AND status = 'processing'""",
                job_id,
                progress,
            )

    async def finish_job(
        self,
        conn: DbConnection,
        job_id: uuid.UUID,
        lease: Lease,
        *,
        state: str,
        error_code: str | None = None,
    ) -> None:
        """Fenced final write of the job (and release of its lease); caller's transaction."""
        await self.job_leases.fenced_update(
            conn, job_id, lease, {"state": state, "error_code": error_code}, release=True
        )

    async def release_job(self, conn: DbConnection, job_id: uuid.UUID, lease: Lease) -> None:
        """Fenced hand-back of an unfinished job: pending again, material pending."""
        await self.job_leases.fenced_update(conn, job_id, lease, {"state": "pending"}, release=True)
        await conn.execute(
            f"""UPDATE {self.materials} SET status = 'pending', updated_at = now()
                 WHERE id = (SELECT material_id FROM {self.jobs} WHERE id = $1) AND status = 'processing'""",
            job_id,
        )

    async def lock_material(self, conn: DbConnection, material_id: uuid.UUID) -> Row:
        row = await conn.fetchrow(f"SELECT * FROM {self.materials} WHERE id = $1 FOR UPDATE", material_id)
        assert row is not None
        return dict(row)

    async def complete_material(
        self, conn: DbConnection, material_id: uuid.UUID, refs: Mapping[str, str]
    ) -> None:
        """Fill only output references that are still empty (a concurrent writer's values win)."""
        await conn.execute(
            f"""UPDATE {self.materials}
                   SET status = 'done', progress = 100, error_code = NULL, updated_at = now(),
                       cover_ref = COALESCE(cover_ref, $2), preview_ref = COALESCE(preview_ref, $3),
                       clip_ref = COALESCE(clip_ref, $4)
                 WHERE id = $1""",
            material_id,
            refs["cover"],
            refs["preview_720p"],
            refs["clip_10s"],
        )

    async def fail_material(self, conn: DbConnection, material_id: uuid.UUID, error_code: str) -> None:
        await conn.execute(
            f"""UPDATE {self.materials} SET status = 'failed', error_code = $2, updated_at = now()
                 WHERE id = $1""",
            material_id,
            error_code,
        )

    async def next_lease_expiry_in(self, conn: DbConnection) -> float | None:
        """Seconds (DB clock) until the earliest current lease of an unfinished job expires; None if none."""
        seconds = await conn.fetchval(
            f"""SELECT extract(epoch FROM min(lease_expires_at) - now())::float8 FROM {self.jobs}
                 WHERE state IN ('pending', 'running') AND lease_expires_at > now()"""
        )
        return None if seconds is None else float(seconds)

    async def leases_of(self, conn: DbConnection, owner: str) -> list[Row]:
        """Current leases held by `owner` on running jobs: (id, material_id, lease_token)."""
        rows = await conn.fetch(
            f"""SELECT id, material_id, lease_token FROM {self.jobs}
                 WHERE lease_owner = $1 AND state = 'running' AND lease_expires_at > now()""",
            owner,
        )
        return [dict(r) for r in rows]

    async def release_dead_lease(
        self, conn: DbConnection, job_id: uuid.UUID, owner: str, token: uuid.UUID
    ) -> bool:
        """Hand back a job whose executor is known dead (the caller holds the material lock): pending
        again, material pending. Matches only the lease that was read, so nothing newer is touched."""
        async with conn.transaction():
            status = await conn.execute(
                f"""UPDATE {self.jobs} SET state = 'pending', lease_owner = NULL, lease_token = NULL,
                           lease_expires_at = NULL, updated_at = now()
                     WHERE id = $1 AND lease_owner = $2 AND lease_token = $3 AND state = 'running'""",
                job_id,
                owner,
                token,
            )
            if status != "UPDATE 1":
                return False
            await conn.execute(
                f"""UPDATE {self.materials} SET status = 'pending', updated_at = now()
                     WHERE id = (SELECT material_id FROM {self.jobs} WHERE id = $1)
                       AND status = 'processing'""",
                job_id,
            )
        return True

    async def tokens_in_use(
        self, conn: DbConnection, tokens: Sequence[uuid.UUID], material_ids: Sequence[uuid.UUID] = ()
    ) -> set[uuid.UUID]:
        """Which attempt tokens may still be needed: the current lease token of a job (an executor that may
        still write), or, for the given materials, the token of a stored output reference
        (`outputs/<material>/<token>/<file>`). One statement, so both come from one snapshot."""
        rows = await conn.fetch(
            f"""SELECT lease_token::text AS token FROM {self.jobs} WHERE lease_token = ANY($1::uuid[])
                UNION
                SELECT split_part(r.ref, '/', 3) FROM {self.materials} m,
                       LATERAL (VALUES (m.cover_ref), (m.preview_ref), (m.clip_ref)) AS r(ref)
                 WHERE m.id = ANY($2::uuid[]) AND r.ref IS NOT NULL""",
            list(tokens),
            list(material_ids),
        )
        in_use: set[uuid.UUID] = set()
        for row in rows:
            try:
                in_use.add(uuid.UUID(row["token"]))
            except ValueError:
                continue  # a reference of another shape names no attempt
        return in_use

    async def try_lock_material(self, conn: DbConnection, material_id: uuid.UUID) -> bool:
        """Session advisory lock held by the one live executor of a material (released on disconnect)."""
        locked: bool = await conn.fetchval(
            "SELECT pg_try_advisory_lock(hashtextextended($1, 0))", self._material_lock_key(material_id)
        )
        return locked

    async def unlock_material(self, conn: DbConnection, material_id: uuid.UUID) -> None:
        await conn.execute(
            "SELECT pg_advisory_unlock(hashtextextended($1, 0))", self._material_lock_key(material_id)
        )

    def _material_lock_key(self, material_id: uuid.UUID) -> str:
        return f"{self.schema}.material:{material_id}"

    # instances -------------------------------------------------------------------------------------
    async def register_instance(self, conn: DbConnection, instance_id: str) -> None:
        await conn.execute(
            f"""INSERT INTO {self.instances} (instance_id) VALUES ($1)
                ON CONFLICT (instance_id) DO UPDATE SET seen_at = now(), draining = false""",
            instance_id,
        )

    async def set_draining(self, conn: DbConnection, instance_id: str) -> None:
        await conn.execute(
            f"""INSERT INTO {self.instances} (instance_id, draining) VALUES ($1, true)
                ON CONFLICT (instance_id) DO UPDATE SET draining = true, seen_at = now()""",
            instance_id,
        )

    async def active_jobs_of(self, conn: DbConnection, instance_id: str) -> int:
        count: int = await conn.fetchval(
            f"""SELECT count(*) FROM {self.jobs}
                 WHERE lease_owner = $1 AND lease_expires_at > now() AND state = 'running'""",
            instance_id,
        )
        return count
