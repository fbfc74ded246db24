"""Watcher secrets (headers, body) at rest, encrypted with the platform key ring (`encryption`).

The associated data binds each ciphertext to its watcher id and field (``signal:watcher:<id>:headers`` /
``:body``), so a ciphertext copied to another row or column fails to decrypt. The ring also reads the format
signal-watcher wrote before the ring (``nonce || ciphertext``, same associated data, no key id): after an
upgrade every existing watcher keeps working, and ``signal-watcher rotate-keys`` rewrites them in the ring's
format under the active key (docs/runbooks/rotating-keys.md).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from signal_watcher.domain.errors import SecretsUnreadable
from signal_watcher.domain.model import Header
from yovision_platform.security import AES_KEY_BYTES, NONCE_BYTES, EncryptionKeyRing, SecretUnreadable

__all__ = [
    "AES_KEY_BYTES",
    "NONCE_BYTES",
    "OpenedSecrets",
    "SealedSecrets",
    "SecretCipher",
    "SecretUnreadable",
    "body_context",
    "headers_context",
]


def headers_context(watcher_id: str) -> str:
    return f"signal:watcher:{watcher_id}:headers"


def body_context(watcher_id: str) -> str:
    return f"signal:watcher:{watcher_id}:body"


@dataclass(frozen=True)
class SealedSecrets:
    """A watcher's secrets as stored: the ciphertexts, and the body's plaintext length (shown to users)."""

    headers: bytes
    body: bytes | None
    body_length: int | None

    def __repr__(self) -> str:
        return f"SealedSecrets(body_length={self.body_length})"


@dataclass(frozen=True)
class OpenedSecrets:
    headers: tuple[Header, ...]
    body: str | None
    error: str | None  # the stable code when they could not be decrypted (then no headers and no body)


class SecretCipher:
    def __init__(self, ring: EncryptionKeyRing) -> None:
        self.ring = ring

    def encrypt_headers(self, headers: Sequence[Header], *, watcher_id: str) -> bytes:
        plain = json.dumps([[h.key, h.value] for h in headers]).encode()
        return self.ring.encrypt(plain, context=headers_context(watcher_id))

    def decrypt_headers(self, stored: bytes, *, watcher_id: str) -> tuple[Header, ...]:
        plain = self.ring.decrypt(stored, context=headers_context(watcher_id))
        try:
            return tuple(Header(str(k), str(v)) for k, v in json.loads(plain))
        except (ValueError, TypeError):
            raise SecretUnreadable() from None

    def encrypt_body(self, body: str, *, watcher_id: str) -> bytes:
        return self.ring.encrypt(body.encode(), context=body_context(watcher_id))

    def decrypt_body(self, stored: bytes, *, watcher_id: str) -> str:
        try:
            return self.ring.decrypt(stored, context=body_context(watcher_id)).decode()
        except UnicodeDecodeError:
            raise SecretUnreadable() from None

    def seal(self, watcher_id: uuid.UUID, headers: Sequence[Header], body: str | None) -> SealedSecrets:
        wid = str(watcher_id)
        sealed_headers = self.encrypt_headers(headers, watcher_id=wid)
        if body is None:
            return SealedSecrets(sealed_headers, None, None)
        return SealedSecrets(sealed_headers, self.encrypt_body(body, watcher_id=wid), len(body.encode()))

    def open(
        self, watcher_id: uuid.UUID, headers: bytes, body: bytes | None, *, tolerate_unreadable: bool = False
    ) -> OpenedSecrets:
        """The decrypted secrets; `SecretsUnreadable` (the refusal an API answers) when they cannot be
        decrypted, unless `tolerate_unreadable`: then the code is in `error` and the secrets are empty."""
        wid = str(watcher_id)
        try:
            return OpenedSecrets(
                self.decrypt_headers(headers, watcher_id=wid),
                None if body is None else self.decrypt_body(body, watcher_id=wid),
                None,
            )
        except SecretUnreadable as exc:
            if not tolerate_unreadable:
                raise SecretsUnreadable(exc.code) from None
            return OpenedSecrets((), None, exc.code)
