"""SQL on ``<schema>.device_operation_outbox`` for the Bell relay: claim, deliver, dead-letter, back off.

Claims go through :class:`~yovision_platform.leases.LeaseTable`: the oldest due rows (``ORDER BY
next_attempt_at, id``: a new fact is due from its insert, so this is insertion order, with retried facts
placed at their retry time; it streams the partial pending index instead of sorting the backlog),
``FOR UPDATE SKIP LOCKED``, each leased to the owner with a random token and a DB-clock expiry. Every later
write is one statement fenced on (id, token) pairs, the owner and ``lease_expires_at > now()``; if it does
not touch *every* row of the claim, the transaction is rolled back and :class:`LeaseLost` raised, so a
worker whose lease expired (or was taken over) writes nothing. Rows are never deleted.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sense_reconciler.bell_relay.facts import OutboxFact
from yovision_platform.db import DbConnection, Identifier
from yovision_platform.errors import LeaseLost
from yovision_platform.leases import LeaseTable

__all__ = ["Claim", "ClaimedFact", "OutboxRepository"]

OUTBOX_TABLE = Identifier("device_operation_outbox")
DUE_CONDITION = "delivered_at IS NULL AND dead_lettered_at IS NULL AND next_attempt_at <= now()"
FACT_COLUMNS = (
    "event_id",
    "fact_version",
    "action",
    "actor",
    "device_id",
    "tenant_id",
    "site_id",
    "changed_fields",
    "config_version",
    "occurred_at",
)
# 2**16 s is far above any cap: keeps power() finite whatever the attempt count.
MAX_BACKOFF_EXPONENT = 16


@dataclass(frozen=True)
class ClaimedFact:
    fact: OutboxFact
    token: uuid.UUID


@dataclass(frozen=True)
class Claim:
    owner: str
    facts: tuple[ClaimedFact, ...]

    @property
    def row_ids(self) -> list[int]:
        return [claimed.fact.row_id for claimed in self.facts]

    @property
    def tokens(self) -> list[uuid.UUID]:
        return [claimed.token for claimed in self.facts]

    def token_of(self, row_id: int) -> uuid.UUID:
        return self._tokens_by_row[row_id]

    @functools.cached_property
    def _tokens_by_row(self) -> dict[int, uuid.UUID]:
        return {claimed.fact.row_id: claimed.token for claimed in self.facts}


class OutboxRepository:
    def __init__(self, schema: Identifier) -> None:
        self._leases = LeaseTable(schema, OUTBOX_TABLE)
        table = self._leases.qualified
        fence = (
            "t.id = l.id AND t.lease_token = l.token AND t.lease_owner = $3 AND t.lease_expires_at > now()"
        )
        release = "lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL"
        self._deliver_sql = f"""
            UPDATE {table} AS t SET delivered_at = now(), last_error_code = NULL, {release}
              FROM unnest($1::bigint[], $2::uuid[]) AS l(id, token)
             WHERE {fence}
        """
        self._dead_letter_sql = f"""
            UPDATE {table} AS t
               SET dead_lettered_at = now(), dead_letter_code = l.code, last_error_code = l.code, {release}
              FROM unnest($1::bigint[], $2::uuid[], $4::text[]) AS l(id, token, code)
             WHERE {fence}
        """
        self._fail_sql = f"""
            UPDATE {table} AS t
               SET attempts = t.attempts + 1,
                   next_attempt_at = now() + make_interval(secs => least(
                       $5::float8, $4::float8 * power(2, least(t.attempts, {MAX_BACKOFF_EXPONENT})))),
                   last_error_code = $6, {release}
              FROM unnest($1::bigint[], $2::uuid[]) AS l(id, token)
             WHERE {fence}
        """

    async def claim(self, conn: DbConnection, owner: str, *, limit: int, lease_seconds: float) -> Claim:
        """Lease up to ``limit`` due facts, oldest due first; returned in that order."""
        rows = await self._leases.claim(
            conn,
            owner,
            lease_seconds=lease_seconds,
            limit=limit,
            due_condition=DUE_CONDITION,
            order_by="next_attempt_at, id",
            returning=(*FACT_COLUMNS, "next_attempt_at"),
        )
        # UPDATE ... RETURNING does not keep the claim's order: restore it.
        rows.sort(key=lambda row: (row.row["next_attempt_at"], row.row_id))
        facts = [
            ClaimedFact(OutboxFact.from_row({**row.row, "id": row.row_id}), row.lease.token) for row in rows
        ]
        return Claim(owner, tuple(facts))

    async def record_results(
        self,
        conn: DbConnection,
        claim: Claim,
        delivered: Sequence[int],
        dead_letters: Sequence[tuple[int, str]],
    ) -> None:
        """Mark ``delivered`` rows delivered and dead-letter the others with their codes, in one
        transaction; LeaseLost (and nothing written) unless the lease still holds for every row."""
        async with conn.transaction():
            if delivered:
                status = await conn.execute(
                    self._deliver_sql, list(delivered), [claim.token_of(i) for i in delivered], claim.owner
                )
                _expect(status, len(delivered))
            if dead_letters:
                ids = [row_id for row_id, _ in dead_letters]
                status = await conn.execute(
                    self._dead_letter_sql,
                    ids,
                    [claim.token_of(i) for i in ids],
                    claim.owner,
                    [code for _, code in dead_letters],
                )
                _expect(status, len(ids))

    async def fail_batch(
        self, conn: DbConnection, claim: Claim, code: str, *, base_seconds: float, cap_seconds: float
    ) -> None:
        """Retry the whole claim later: ``attempts + 1``, ``next_attempt_at = now() + min(cap, base *
        2**attempts)`` (1 s, 2 s, 4 s, ... 300 s with the defaults), ``last_error_code = code``."""
        async with conn.transaction():
            status = await conn.execute(
                self._fail_sql, claim.row_ids, claim.tokens, claim.owner, base_seconds, cap_seconds, code
            )
            _expect(status, len(claim.facts))


def _expect(status: str, rows: int) -> None:
    if status != f"UPDATE {rows}":
        raise LeaseLost()
