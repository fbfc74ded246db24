"""SQL for ``audit_relay_receipts`` (`ReceiptStore`): the stored response per (key id, nonce), kept 600 s by
the database clock (the migration's trigger stamps it and refuses to delete an unexpired one)."""

from __future__ import annotations

from bell_receiver.domain.receipts import Receipt
from yovision_platform.storage import DbConnection, Identifier


class PostgresReceiptStore:
    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        self._conn = conn
        self._table = f"{schema.quoted}.audit_relay_receipts"

    async def lock(self, key_id: str, nonce: str) -> None:
        """Serialize concurrent requests with one (key id, nonce) until the transaction ends."""
        await self._conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"bell-receipt:{key_id}:{nonce}"
        )

    async def find_live(self, key_id: str, nonce: str) -> Receipt | None:
        """The unexpired receipt of (key id, nonce); an expired one is deleted and ignored."""
        row = await self._conn.fetchrow(
            f"""WITH expired AS (
                    DELETE FROM {self._table} WHERE key_id = $1 AND nonce = $2 AND expires_at <= now()
                )
                SELECT request_digest, response_status, response_body FROM {self._table}
                 WHERE key_id = $1 AND nonce = $2 AND expires_at > now()""",
            key_id,
            nonce,
        )
        if row is None:
            return None
        return Receipt(bytes(row["request_digest"]), row["response_status"], bytes(row["response_body"]))

    async def store(self, key_id: str, nonce: str, receipt: Receipt) -> None:
        await self._conn.execute(
            f"INSERT INTO {self._table} (key_id, nonce, request_digest, response_status, response_body)"
            " VALUES ($1, $2, $3, $4, $5)",
            key_id,
            nonce,
            receipt.request_digest,
            receipt.response_status,
            receipt.response_body,
        )

    async def purge_expired(self) -> int:
        result = await self._conn.execute(f"DELETE FROM {self._table} WHERE expires_at <= now()")
        return int(result.split()[-1])
