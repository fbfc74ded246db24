"""Nonce receipts: the answer Bell gave one signed request, kept per (key id, nonce) for
`yovision_platform.security.NONCE_RECEIPT_TTL_SECONDS` by the database clock."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Receipt:
    request_digest: bytes
    response_status: int
    response_body: bytes
