"""Source URIs (camera credentials) at rest: encrypted with the platform key ring, bound to their device.

The associated data is ``sense:devices:<device id>:source_uri``, so a ciphertext copied onto another device
does not decrypt. Rows from before encryption (migration 0007) still hold cleartext, which `reveal` returns
until the service has encrypted them (`encrypt_legacy_rows`, at start-up and by `rotate-keys`).
"""

from __future__ import annotations

import uuid

from sense_reconciler.domain.records import StoredSource
from yovision_platform.security import EncryptionKeyRing

__all__ = ["SourceUris", "source_uri_context"]


def source_uri_context(device_id: uuid.UUID) -> str:
    return f"sense:devices:{device_id}:source_uri"


class SourceUris:
    def __init__(self, ring: EncryptionKeyRing) -> None:
        self.ring = ring

    def seal(self, device_id: uuid.UUID, source_uri: str) -> bytes:
        return self.ring.encrypt(source_uri.encode("utf-8"), context=source_uri_context(device_id))

    def reveal(self, device_id: uuid.UUID, stored: StoredSource) -> str:
        """The cleartext URI. Raises SecretUnreadable (stable code) when the ciphertext cannot be read."""
        if stored.ciphertext is None:
            assert stored.plaintext is not None
            return stored.plaintext
        return self.ring.decrypt(stored.ciphertext, context=source_uri_context(device_id)).decode("utf-8")
