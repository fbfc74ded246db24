"""Secrets at rest: AES-256-GCM under a key ring, one ciphertext per (row, field).

Contract:

- a ring holds one or more 32-byte keys, each with an id (:data:`KEY_ID_PATTERN`); new ciphertexts use the
  *active* key (the newest the operator configured), and every key in the ring decrypts;
- the key id is stored with each ciphertext (its header), so a ring with several keys finds the right one,
  and a ciphertext whose key is not in the ring fails with ``secret_key_unknown``;
- the associated data binds a ciphertext to its row and field: the caller passes a *context* such as
  ``sense:devices:<id>:source_uri``; the header is bound too. A ciphertext copied to another row or field, or
  altered in any byte, fails with ``secret_unreadable``;
- rings built with ``accept_legacy=True`` also decrypt the format signal-watcher wrote before the ring
  (``nonce || ciphertext+tag``, associated data = the context alone, no key id): every key is tried;
- failures are :class:`SecretUnreadable` with a stable code; neither a key, a plaintext nor a ciphertext
  ever appears in an error or a log.

Stored layout, version 1::

    b"YV" | 0x01 | len(key id) (1 byte) | key id (ASCII) | nonce (12 bytes) | ciphertext + 16-byte tag

Re-encryption under the active key (``rotate-keys``) is :mod:`yovision_platform.security`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import Field, PrivateAttr

from yovision_platform.errors import ConfigError, PlatformError
from yovision_platform.security._signing import load_key_file
from yovision_platform.settings import BaseServiceSettings

__all__ = [
    "AES_KEY_BYTES",
    "KEY_ID_PATTERN",
    "NONCE_BYTES",
    "EncryptionKeyRing",
    "EncryptionSettings",
    "SecretUnreadable",
]

AES_KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
KEY_ID_MAX_CHARS = 32
KEY_ID_PATTERN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{KEY_ID_MAX_CHARS - 1}}}")
MAGIC = b"YV"
FORMAT_VERSION = 1


class SecretUnreadable(PlatformError):
    """code: ``secret_unreadable`` (tampered, wrong row or field, not a ciphertext) or
    ``secret_key_unknown`` (the ciphertext names a key id the ring does not hold)."""

    def __init__(self, code: str = "secret_unreadable") -> None:
        super().__init__(code, "a stored secret could not be decrypted")


def _header(key_id: str) -> bytes:
    raw = key_id.encode("ascii")
    return MAGIC + bytes([FORMAT_VERSION, len(raw)]) + raw


def _split(stored: bytes) -> tuple[bytes, str, bytes] | None:
    """(header, key id, nonce + ciphertext) of a version-1 ciphertext; None when it is not one."""
    if len(stored) < 4 or stored[:2] != MAGIC or stored[2] != FORMAT_VERSION:
        return None
    end = 4 + stored[3]
    try:
        key_id = stored[4:end].decode("ascii")
    except UnicodeDecodeError:
        return None
    if KEY_ID_PATTERN.fullmatch(key_id) is None or len(stored) < end + NONCE_BYTES + TAG_BYTES:
        return None
    return stored[:end], key_id, stored[end:]


class EncryptionKeyRing:
    def __init__(self, keys: Mapping[str, bytes], active_key_id: str, *, accept_legacy: bool = False) -> None:
        if not keys:
            raise ValueError("a key ring needs at least one key")
        for key_id, key in keys.items():
            if KEY_ID_PATTERN.fullmatch(key_id) is None:
                raise ValueError(f"key ids must match {KEY_ID_PATTERN.pattern}")
            if len(key) != AES_KEY_BYTES:
                raise ValueError(f"every key must be exactly {AES_KEY_BYTES} bytes")
        if active_key_id not in keys:
            raise ValueError("the active key id is not in the ring")
        self._aeads = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self._active = active_key_id
        self._active_header = _header(active_key_id)
        self._accept_legacy = accept_legacy

    def __repr__(self) -> str:
        return f"EncryptionKeyRing(key_ids={sorted(self._aeads)}, active={self._active!r})"

    @classmethod
    def from_key_files(
        cls,
        files: Mapping[str, tuple[Path, str]],
        active_key_id: str | None,
        *,
        active_setting: str,
        files_setting: str | None = None,
        accept_legacy: bool = False,
    ) -> EncryptionKeyRing:
        """Read each ``key id -> (file, the setting naming it)`` (hex of exactly 32 bytes). The active key
        defaults to the only key; with several, ``active_key_id`` must name one. ConfigError otherwise:
        there is no built-in key, so a process without one refuses to start."""
        if not files:
            setting = files_setting or active_setting
            raise ConfigError(setting, "no_key", "no encryption key configured; there is no default")
        keys: dict[str, bytes] = {}
        for key_id, (path, setting) in files.items():
            if KEY_ID_PATTERN.fullmatch(key_id) is None:
                raise ConfigError(setting, "key_id_malformed", f"key ids must match {KEY_ID_PATTERN.pattern}")
            key = load_key_file(path, setting)
            if len(key) != AES_KEY_BYTES:
                raise ConfigError(setting, "key_wrong_length", f"key must decode to {AES_KEY_BYTES} bytes")
            keys[key_id] = key
        if active_key_id is None:
            if len(keys) != 1:
                raise ConfigError(active_setting, "missing", "several keys: name the active (newest) one")
            active_key_id = next(iter(keys))
        if active_key_id not in keys:
            raise ConfigError(active_setting, "unknown_key_id", "the active key id names no configured key")
        return cls(keys, active_key_id, accept_legacy=accept_legacy)

    @property
    def active_key_id(self) -> str:
        return self._active

    @property
    def key_ids(self) -> frozenset[str]:
        return frozenset(self._aeads)

    def encrypt(self, plaintext: bytes, *, context: str) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aeads[self._active].encrypt(nonce, plaintext, self._aad(self._active_header, context))
        return self._active_header + nonce + sealed

    def decrypt(self, stored: bytes, *, context: str) -> bytes:
        parts = _split(stored)
        if parts is not None:
            header, key_id, body = parts
            aead = self._aeads.get(key_id)
            if aead is not None:
                try:
                    return aead.decrypt(body[:NONCE_BYTES], body[NONCE_BYTES:], self._aad(header, context))
                except InvalidTag:
                    pass
            if not self._accept_legacy:  # a legacy nonce can start like a header: try that next
                raise SecretUnreadable("secret_unreadable" if aead is not None else "secret_key_unknown")
        if self._accept_legacy and len(stored) >= NONCE_BYTES + TAG_BYTES:
            for aead in self._aeads.values():
                try:
                    return aead.decrypt(stored[:NONCE_BYTES], stored[NONCE_BYTES:], context.encode())
                except InvalidTag:
                    continue
        if parts is not None and parts[1] not in self._aeads:
            raise SecretUnreadable("secret_key_unknown")
        raise SecretUnreadable()

    def key_id_of(self, stored: bytes) -> str | None:
        """The key id a ciphertext names; None for the legacy format (or no ciphertext at all)."""
        parts = _split(stored)
        return None if parts is None else parts[1]

    def is_current(self, stored: bytes) -> bool:
        """True when ``stored`` is a version-1 ciphertext under the active key (nothing to rotate)."""
        return stored.startswith(self._active_header) and _split(stored) is not None

    @staticmethod
    def _aad(header: bytes, context: str) -> bytes:
        return header + b"\n" + context.encode("utf-8")


class EncryptionSettings(BaseServiceSettings):
    """Settings of a service that encrypts secrets at rest (env prefix ``P_``):

    - ``P_SECRETS_KEY_FILES``: JSON object ``{"<key id>": "/path/to/key"}``, each file the hex of exactly 32
      random bytes (``openssl rand -hex 32``);
    - ``P_SECRETS_ACTIVE_KEY_ID``: the key new ciphertexts use (the newest); may be left out with one key.

    Subclasses may add keys from older settings (:meth:`extra_key_files`). Without any key, start-up is
    refused (``no_key``): there is no built-in default.
    """

    secrets_key_files: dict[str, Path] = Field(default_factory=dict)
    secrets_active_key_id: str | None = None

    # signal-watcher's ring also reads its pre-ring ciphertexts (see the module docstring)
    accept_legacy_ciphertexts: ClassVar[bool] = False
    _key_ring: EncryptionKeyRing | None = PrivateAttr(default=None)

    def extra_key_files(self) -> dict[str, tuple[Path, str]]:
        """More ``key id -> (file, setting)`` entries for the ring; none by default."""
        return {}

    def load_secret_files(self) -> None:
        super().load_secret_files()
        setting = self.env_var_name("secrets_key_files")
        files = {key_id: (path, f"{setting}[{key_id}]") for key_id, path in self.secrets_key_files.items()}
        for key_id, entry in self.extra_key_files().items():
            if key_id in files:
                raise ConfigError(entry[1], "duplicate_key_id", "this key id is configured twice")
            files[key_id] = entry
        self._key_ring = EncryptionKeyRing.from_key_files(
            files,
            self.secrets_active_key_id,
            active_setting=self.env_var_name("secrets_active_key_id"),
            files_setting=setting,
            accept_legacy=self.accept_legacy_ciphertexts,
        )

    @property
    def key_ring(self) -> EncryptionKeyRing:
        if self._key_ring is None:
            self.load_secret_files()
        assert self._key_ring is not None
        return self._key_ring
