"""`watchers.headers_ciphertext` and `body_ciphertext` as rows for the platform's key rotation
(yovision_platform.security). The swap is a compare-and-set on both columns, so a concurrent edit
through the API is never overwritten (the rotation looks at that row again in its next pass)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from signal_watcher.adapters.crypto import body_context, headers_context
from yovision_platform.security import SecretField, SecretRow
from yovision_platform.storage import DbConnection, Identifier

HEADERS = "headers"
BODY = "body"


class WatcherSecrets:
    def __init__(self, schema: Identifier) -> None:
        s = schema.quoted
        self._page = f"""
            SELECT id, headers_ciphertext, body_ciphertext FROM {s}.watchers
             WHERE ($1::uuid IS NULL OR id > $1) ORDER BY id LIMIT $2
        """
        self._swap = f"""
            UPDATE {s}.watchers SET headers_ciphertext = $2, body_ciphertext = $3
             WHERE id = $1 AND headers_ciphertext = $4 AND body_ciphertext IS NOT DISTINCT FROM $5
        """

    async def page(self, conn: DbConnection, *, after: Any | None, limit: int) -> Sequence[SecretRow]:
        rows = await conn.fetch(self._page, after, limit)
        return [
            SecretRow(
                r["id"],
                {
                    HEADERS: SecretField(headers_context(str(r["id"])), bytes(r["headers_ciphertext"])),
                    BODY: SecretField(
                        body_context(str(r["id"])),
                        None if r["body_ciphertext"] is None else bytes(r["body_ciphertext"]),
                    ),
                },
            )
            for r in rows
        ]

    async def swap(self, conn: DbConnection, row: SecretRow, ciphertexts: Mapping[str, bytes | None]) -> bool:
        status = await conn.execute(
            self._swap,
            row.row_id,
            ciphertexts[HEADERS],
            ciphertexts[BODY],
            row.fields[HEADERS].stored,
            row.fields[BODY].stored,
        )
        return bool(status == "UPDATE 1")
