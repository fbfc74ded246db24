"""Fenced leases on rows of a table, all timed by the database clock.

A lease is (owner, random token, expiry). Claiming sets all three; every later write on the row -- renew,
complete, fail, release -- is one UPDATE whose WHERE clause demands the same owner and token and an expiry
still in the future *by the database clock*. When that UPDATE matches no row the caller has lost the lease
and gets `LeaseLost`; it must then write nothing and touch nothing outside, because another worker may
already own the row. Tokens come from `gen_random_uuid()` (a CSPRNG), so a stale worker cannot guess them.

The table needs the columns `lease_owner text`, `lease_token uuid` and `lease_expires_at timestamptz`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from yovision_platform.errors import LeaseLost
from yovision_platform.storage._db import DbConnection, Identifier

__all__ = ["ClaimedRow", "Lease", "LeaseTable"]

MAX_CLAIM_BATCH = 1000
ID_COLUMN = Identifier("id")


@dataclass(frozen=True)
class Lease:
    owner: str
    token: uuid.UUID
    expires_at: datetime


@dataclass(frozen=True)
class ClaimedRow:
    row_id: Any
    lease: Lease
    row: Mapping[str, Any]


@dataclass(frozen=True)
class LeaseTable:
    """Lease operations on `schema.table`, rows identified by `id_column`.

    `claim` takes a SQL condition for due-ness; inside it `$1` is the owner, `$2` the lease length in seconds
    and `$3` the batch limit, so the condition's own parameters start at `$4`.
    """

    schema: Identifier
    table: Identifier
    id_column: Identifier = ID_COLUMN

    @property
    def qualified(self) -> str:
        return f"{self.schema.quoted}.{self.table.quoted}"

    async def claim(
        self,
        conn: DbConnection,
        owner: str,
        *,
        lease_seconds: float,
        limit: int,
        due_condition: str = "TRUE",
        order_by: str | None = None,
        params: Sequence[object] = (),
        returning: Sequence[str] = (),
    ) -> list[ClaimedRow]:
        if not 1 <= limit <= MAX_CLAIM_BATCH:
            raise ValueError(f"claim limit must be within 1..{MAX_CLAIM_BATCH}")
        idc = self.id_column.quoted
        extra = "".join(f", t.{Identifier(column).quoted}" for column in returning)
        sql = f"""
            WITH due AS (
                SELECT {idc} FROM {self.qualified}
                 WHERE ({due_condition})
                   AND (lease_expires_at IS NULL OR lease_expires_at <= now())
                 ORDER BY {order_by or idc}
                 LIMIT $3
                 FOR UPDATE SKIP LOCKED
            )
            UPDATE {self.qualified} AS t
               SET lease_owner = $1,
                   lease_token = gen_random_uuid(),
                   lease_expires_at = now() + make_interval(secs => $2)
              FROM due
             WHERE t.{idc} = due.{idc}
         RETURNING t.{idc} AS row_id, t.lease_owner, t.lease_token, t.lease_expires_at{extra}
        """
        rows = await conn.fetch(sql, owner, float(lease_seconds), limit, *params)
        return [
            ClaimedRow(
                row_id=r["row_id"],
                lease=Lease(r["lease_owner"], r["lease_token"], r["lease_expires_at"]),
                row=dict(r),
            )
            for r in rows
        ]

    async def renew(self, conn: DbConnection, row_id: object, lease: Lease, *, lease_seconds: float) -> Lease:
        expires = await conn.fetchval(
            f"""
            UPDATE {self.qualified}
               SET lease_expires_at = now() + make_interval(secs => $4)
             WHERE {self.id_column.quoted} = $1 AND lease_owner = $2 AND lease_token = $3
               AND lease_expires_at > now()
         RETURNING lease_expires_at
            """,
            row_id,
            lease.owner,
            lease.token,
            float(lease_seconds),
        )
        if expires is None:
            raise LeaseLost()
        return Lease(lease.owner, lease.token, expires)

    async def fenced_update(
        self,
        conn: DbConnection,
        row_id: object,
        lease: Lease,
        assignments: Mapping[str, object],
        *,
        release: bool = True,
    ) -> None:
        """Write `assignments` only while `lease` is current; `release` also clears the lease columns."""
        sets = [f"{Identifier(column).quoted} = ${i}" for i, column in enumerate(assignments, start=4)]
        if release:
            sets += ["lease_owner = NULL", "lease_token = NULL", "lease_expires_at = NULL"]
        if not sets:
            raise ValueError("fenced_update needs at least one assignment or release=True")
        status = await conn.execute(
            f"""
            UPDATE {self.qualified} SET {", ".join(sets)}
             WHERE {self.id_column.quoted} = $1 AND lease_owner = $2 AND lease_token = $3
               AND lease_expires_at > now()
            """,
            row_id,
            lease.owner,
            lease.token,
            *assignments.values(),
        )
        if status != "UPDATE 1":
            raise LeaseLost()

    async def release(self, conn: DbConnection, row_id: object, lease: Lease) -> None:
        await self.fenced_update(conn, row_id, lease, {}, release=True)
