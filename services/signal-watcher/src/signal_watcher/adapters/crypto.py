"""AES-256-GCM encryption of watcher secrets (headers, body) at rest.

Stored form: 12-byte random nonce || ciphertext+tag. The associated data binds each ciphertext to its
watcher id and field, so a ciphertext copied to another row or column fails to decrypt.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from signal_watcher.domain.model import Header
from yovision_platform.errors import ConfigError, PlatformError
from yovision_platform.signing import load_key_file

__all__ = ["AES_KEY_BYTES", "NONCE_BYTES", "SecretCipher", "SecretUnreadable"]

AES_KEY_BYTES = 32
NONCE_BYTES = 12


class SecretUnreadable(PlatformError):
    code = "secret_unreadable"


class SecretCipher:
    def __init__(self, key: bytes) -> None:
        if len(key) != AES_KEY_BYTES:
            raise ValueError(f"the AES key must be exactly {AES_KEY_BYTES} bytes")
        self._aead = AESGCM(key)

    @classmethod
    def from_key_file(cls, path: str | os.PathLike[str], setting_name: str) -> SecretCipher:
        key = load_key_file(path, setting_name)
        if len(key) != AES_KEY_BYTES:
            raise ConfigError(setting_name, "key_wrong_length", f"key must decode to {AES_KEY_BYTES} bytes")
        return cls(key)

    def encrypt(self, plaintext: bytes, *, context: str) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plaintext, context.encode())

    def decrypt(self, stored: bytes, *, context: str) -> bytes:
        try:
            return self._aead.decrypt(stored[:NONCE_BYTES], stored[NONCE_BYTES:], context.encode())
        except (InvalidTag, ValueError):
            raise SecretUnreadable() from None

    def encrypt_headers(self, headers: Sequence[Header], *, watcher_id: str) -> bytes:
        plain = json.dumps([[h.key, h.value] for h in headers]).encode()
        return self.encrypt(plain, context=f"signal:watcher:{watcher_id}:headers")

    def decrypt_headers(self, stored: bytes, *, watcher_id: str) -> tuple[Header, ...]:
        plain = self.decrypt(stored, context=f"signal:watcher:{watcher_id}:headers")
        return tuple(Header(str(k), str(v)) for k, v in json.loads(plain))

    def encrypt_body(self, body: str, *, watcher_id: str) -> bytes:
        return self.encrypt(body.encode(), context=f"signal:watcher:{watcher_id}:body")

    def decrypt_body(self, stored: bytes, *, watcher_id: str) -> str:
        return self.decrypt(stored, context=f"signal:watcher:{watcher_id}:body").decode()
