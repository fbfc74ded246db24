"""Display masking: sensitive header values are replaced, the body is shown only by its length."""

from __future__ import annotations

from collections.abc import Sequence

from signal_watcher.domain.model import Header

__all__ = [
    "MASK",
    "SENSITIVE_KEY_PARTS",
    "body_length",
    "is_sensitive_key",
    "mask_headers",
    "unmask_headers",
]

MASK = "******"
SENSITIVE_KEY_PARTS = ("authorization", "cookie", "x-api-key", "token", "secret", "password")


def is_sensitive_key(key: str) -> bool:
    lowered = key.lower()
    return any(part in lowered for part in SENSITIVE_KEY_PARTS)


def mask_headers(headers: Sequence[Header]) -> list[Header]:
    return [Header(h.key, MASK if is_sensitive_key(h.key) else h.value) for h in headers]


def unmask_headers(sent: Sequence[Header], stored: Sequence[Header]) -> tuple[Header, ...]:
    """`sent` with each sensitive header sent back as MASK given its stored value (same key, any case), so
    an edit of a masked watcher keeps its secrets; any other header is taken as sent."""
    values = {h.key.lower(): h.value for h in stored}
    return tuple(
        Header(h.key, values[h.key.lower()])
        if h.value == MASK and is_sensitive_key(h.key) and h.key.lower() in values
        else h
        for h in sent
    )


def body_length(body: str | None) -> int | None:
    return None if body is None else len(body.encode())
