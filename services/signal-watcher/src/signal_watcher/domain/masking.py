"""Display masking: sensitive header values are replaced, the body is shown only by its length."""

from __future__ import annotations

from collections.abc import Sequence

from signal_watcher.domain.model import Header

__all__ = ["MASK", "SENSITIVE_KEY_PARTS", "body_length", "is_sensitive_key", "mask_headers"]

MASK = "******"
SENSITIVE_KEY_PARTS = ("authorization", "cookie", "x-api-key", "token", "secret", "password")


def is_sensitive_key(key: str) -> bool:
    lowered = key.lower()
    return any(part in lowered for part in SENSITIVE_KEY_PARTS)


def mask_headers(headers: Sequence[Header]) -> list[Header]:
    return [Header(h.key, MASK if is_sensitive_key(h.key) else h.value) for h in headers]


def body_length(body: str | None) -> int | None:
    return None if body is None else len(body.encode())
