"""`devices.source_uri_ciphertext` as rows for the platform's key rotation (yovision_platform.security).

`legacy_only`: just the rows from before encryption (cleartext in `source_uri`), which the service encrypts
at start-up. The swap is a compare-and-set on both columns, so a concurrent API change is never overwritten.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sense_reconciler.service_layer.source_uris import source_uri_context
from yovision_platform.security import SecretField, SecretRow
from yovision_platform.storage import DbConnection, Identifier

FIELD = "source_uri"


class SourceUriSecrets:
    def __init__(self, schema: Identifier, *, legacy_only: bool = False) -> None:
        s = schema.quoted
        only = "AND source_uri IS NOT NULL" if legacy_only else ""
        self._page = f"""
            SELECT id, source_uri, source_uri_ciphertext FROM {s}.devices
             WHERE ($1::uuid IS NULL OR id > $1) {only}
             ORDER BY id LIMIT $2
        """
        self._swap = f"""
            UPDATE {s}.devices SET source_uri_ciphertext = $2, source_uri = NULL
             WHERE id = $1 AND source_uri_ciphertext IS NOT DISTINCT FROM $3
               AND source_uri IS NOT DISTINCT FROM $4
        """

    async def page(self, conn: DbConnection, *, after: Any | None, limit: int) -> Sequence[SecretRow]:
        rows = await conn.fetch(self._page, after, limit)
        return [
            SecretRow(
                r["id"],
                {
                    FIELD: SecretField(
                        source_uri_context(r["id"]),
                        None if r["source_uri_ciphertext"] is None else bytes(r["source_uri_ciphertext"]),
                        None if r["source_uri"] is None else r["source_uri"].encode("utf-8"),
                    )
                },
            )
            for r in rows
        ]

    async def swap(self, conn: DbConnection, row: SecretRow, ciphertexts: Mapping[str, bytes | None]) -> bool:
        before = row.fields[FIELD]
        plaintext = None if before.plaintext is None else before.plaintext.decode("utf-8")
        device_id: uuid.UUID = row.row_id
        status = await conn.execute(self._swap, device_id, ciphertexts[FIELD], before.stored, plaintext)
        return bool(status == "UPDATE 1")
