"""Watcher secrets (headers, body) at rest, encrypted with the platform key ring (`encryption`).

The associated data binds each ciphertext to its watcher id and field (``signal:watcher:<id>:headers`` /
``:body``), so a ciphertext copied to another row or column fails to decrypt. The ring also reads the format
signal-watcher wrote before the ring (``nonce || ciphertext``, same associated data, no key id): after an
upgrade every existing watcher keeps working, and ``signal-watcher rotate-keys`` rewrites them in the ring's
format under the active key (docs/runbooks/rotating-keys.md).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from signal_watcher.domain.model import Header
from yovision_platform.encryption import AES_KEY_BYTES, NONCE_BYTES, EncryptionKeyRing, SecretUnreadable

__all__ = [
    "AES_KEY_BYTES",
    "NONCE_BYTES",
    "SecretCipher",
    "SecretUnreadable",
    "body_context",
    "headers_context",
]


def headers_context(watcher_id: str) -> str:
    return f"signal:watcher:{watcher_id}:headers"


def body_context(watcher_id: str) -> str:
    return f"signal:watcher:{watcher_id}:body"


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
