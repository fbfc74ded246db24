from __future__ import annotations

import os

import pytest

from signal_watcher.adapters.crypto import AES_KEY_BYTES, SecretCipher, SecretUnreadable
from signal_watcher.domain.model import Header
from signal_watcher.settings import DEFAULT_CHECK_RETENTION_DAYS, effective_retention_days


def test_headers_and_body_round_trip_and_are_not_plaintext() -> None:
    cipher = SecretCipher(os.urandom(AES_KEY_BYTES))
    headers = (Header("Authorization", "Bearer abc"), Header("X-A", "1"))
    stored = cipher.encrypt_headers(headers, watcher_id="w1")
    assert b"Bearer abc" not in stored and b"Authorization" not in stored
    assert cipher.decrypt_headers(stored, watcher_id="w1") == headers
    assert cipher.decrypt_body(cipher.encrypt_body("pw=1", watcher_id="w1"), watcher_id="w1") == "pw=1"
    assert cipher.encrypt_body("same", watcher_id="w1") != cipher.encrypt_body("same", watcher_id="w1")


def test_ciphertext_is_bound_to_its_watcher_field_and_key() -> None:
    cipher = SecretCipher(os.urandom(AES_KEY_BYTES))
    stored = cipher.encrypt_body("secret", watcher_id="w1")
    with pytest.raises(SecretUnreadable):
        cipher.decrypt_body(stored, watcher_id="w2")
    with pytest.raises(SecretUnreadable):
        cipher.decrypt_headers(stored, watcher_id="w1")
    with pytest.raises(SecretUnreadable):
        SecretCipher(os.urandom(AES_KEY_BYTES)).decrypt_body(stored, watcher_id="w1")


@pytest.mark.parametrize("length", [AES_KEY_BYTES - 1, AES_KEY_BYTES + 1, 0])
def test_only_32_byte_keys_are_accepted(length: int) -> None:
    with pytest.raises(ValueError, match="exactly 32 bytes"):
        SecretCipher(os.urandom(length))


@pytest.mark.parametrize(("configured", "effective"), [(90, 90), (1, 1), (365, 365), (0, 90), (-5, 90)])
def test_non_positive_retention_falls_back_to_90_days(configured: int, effective: int) -> None:
    assert DEFAULT_CHECK_RETENTION_DAYS == 90
    assert effective_retention_days(configured) == effective
