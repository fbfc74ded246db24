"""The platform key ring (AES-256-GCM): key ids, several keys, associated data, the legacy format."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from yovision_platform.errors import ConfigError
from yovision_platform.security import AES_KEY_BYTES, NONCE_BYTES, EncryptionKeyRing, SecretUnreadable
from yovision_platform.tools.localhost import write_private_file

CONTEXT = "sense:devices:0b8e:source_uri"


def key() -> bytes:
    return os.urandom(AES_KEY_BYTES)


def unreadable(ring: EncryptionKeyRing, stored: bytes, context: str = CONTEXT) -> str:
    with pytest.raises(SecretUnreadable) as caught:
        ring.decrypt(stored, context=context)
    return caught.value.code


def test_a_ciphertext_carries_the_active_key_id_and_round_trips() -> None:
    ring = EncryptionKeyRing({"k1": key()}, "k1")
    stored = ring.encrypt(b"rtsp://admin:pw@cam/1", context=CONTEXT)
    assert b"pw@cam" not in stored
    assert ring.key_id_of(stored) == "k1" and ring.is_current(stored)
    assert ring.decrypt(stored, context=CONTEXT) == b"rtsp://admin:pw@cam/1"
    assert ring.encrypt(b"same", context=CONTEXT) != ring.encrypt(b"same", context=CONTEXT)


def test_every_key_decrypts_and_the_active_one_encrypts() -> None:
    old, new = key(), key()
    before = EncryptionKeyRing({"k1": old}, "k1").encrypt(b"secret", context=CONTEXT)
    ring = EncryptionKeyRing({"k1": old, "k2": new}, "k2")
    assert ring.decrypt(before, context=CONTEXT) == b"secret"
    assert not ring.is_current(before)
    after = ring.encrypt(b"secret", context=CONTEXT)
    assert ring.key_id_of(after) == "k2" and ring.is_current(after)
    assert EncryptionKeyRing({"k2": new}, "k2").decrypt(after, context=CONTEXT) == b"secret"


def test_a_key_id_missing_from_the_ring_is_secret_key_unknown() -> None:
    stored = EncryptionKeyRing({"k1": key()}, "k1").encrypt(b"secret", context=CONTEXT)
    assert unreadable(EncryptionKeyRing({"k2": key()}, "k2"), stored) == "secret_key_unknown"
    assert unreadable(EncryptionKeyRing({"k2": key()}, "k2", accept_legacy=True), stored) == (
        "secret_key_unknown"
    )


def test_the_same_key_id_with_other_key_material_is_unreadable() -> None:
    stored = EncryptionKeyRing({"k1": key()}, "k1").encrypt(b"secret", context=CONTEXT)
    assert unreadable(EncryptionKeyRing({"k1": key()}, "k1"), stored) == "secret_unreadable"


@pytest.mark.parametrize("position", [0, 2, 3, 5, NONCE_BYTES + 6, -1])
def test_any_altered_byte_is_unreadable(position: int) -> None:
    ring = EncryptionKeyRing({"k1": key()}, "k1")
    stored = bytearray(ring.encrypt(b"secret", context=CONTEXT))
    stored[position] ^= 0x01
    assert unreadable(ring, bytes(stored)) in {"secret_unreadable", "secret_key_unknown"}


def test_a_ciphertext_is_bound_to_its_row_and_field() -> None:
    ring = EncryptionKeyRing({"k1": key()}, "k1")
    stored = ring.encrypt(b"secret", context="signal:watcher:w1:headers")
    assert unreadable(ring, stored, "signal:watcher:w2:headers") == "secret_unreadable"
    assert unreadable(ring, stored, "signal:watcher:w1:body") == "secret_unreadable"


@pytest.mark.parametrize(
    "stored", [b"", b"YV", b"YV\x01\x02k1", os.urandom(40)], ids=["empty", "magic", "header", "random"]
)
def test_garbage_is_unreadable(stored: bytes) -> None:
    ring = EncryptionKeyRing({"k1": key()}, "k1", accept_legacy=True)
    assert unreadable(ring, stored) in {"secret_unreadable", "secret_key_unknown"}


def test_the_legacy_format_is_read_only_by_rings_that_accept_it() -> None:
    legacy_key = key()
    nonce = os.urandom(NONCE_BYTES)
    legacy = nonce + AESGCM(legacy_key).encrypt(nonce, b"headers", CONTEXT.encode())
    ring = EncryptionKeyRing({"new": key(), "legacy": legacy_key}, "new", accept_legacy=True)
    assert ring.decrypt(legacy, context=CONTEXT) == b"headers"
    assert ring.key_id_of(legacy) is None and not ring.is_current(legacy)
    assert unreadable(ring, legacy, "other:context") == "secret_unreadable"
    assert unreadable(EncryptionKeyRing({"legacy": legacy_key}, "legacy"), legacy) == "secret_unreadable"


def test_an_error_never_names_a_key_or_plaintext() -> None:
    secret_key = key()
    ring = EncryptionKeyRing({"k1": secret_key}, "k1")
    with pytest.raises(SecretUnreadable) as caught:
        ring.decrypt(b"YV\x01\x02k1" + os.urandom(40), context=CONTEXT)
    assert secret_key.hex() not in str(caught.value) and "k1" not in str(caught.value)
    assert repr(ring) == "EncryptionKeyRing(key_ids=['k1'], active='k1')"


@pytest.mark.parametrize(
    ("keys", "active", "message"),
    [
        ({}, "k1", "at least one key"),
        ({"k1": b"short"}, "k1", "exactly 32 bytes"),
        ({"bad id!": os.urandom(32)}, "bad id!", "key ids must match"),
        ({"k1": os.urandom(32)}, "k2", "active key id is not in the ring"),
    ],
)
def test_invalid_rings_are_refused(keys: dict[str, bytes], active: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EncryptionKeyRing(keys, active)


def files(tmp_path: Path, *key_ids: str) -> dict[str, tuple[Path, str]]:
    return {
        key_id: (write_private_file(tmp_path / f"{key_id}.key", key().hex() + "\n"), f"X_KEY[{key_id}]")
        for key_id in key_ids
    }


def refusal(files: dict[str, tuple[Path, str]], active: str | None) -> tuple[tuple[str, ...], str]:
    with pytest.raises(ConfigError) as caught:
        EncryptionKeyRing.from_key_files(files, active, active_setting="X_ACTIVE_KEY_ID")
    return caught.value.settings, str(caught.value)


def test_no_key_refuses_start_up(tmp_path: Path) -> None:
    settings, text = refusal({}, None)
    assert settings == ("X_ACTIVE_KEY_ID",) and "no_key" in text


def test_key_files_build_a_ring_whose_only_key_is_active(tmp_path: Path) -> None:
    ring = EncryptionKeyRing.from_key_files(files(tmp_path, "k1"), None, active_setting="X_ACTIVE")
    assert ring.active_key_id == "k1"
    two = EncryptionKeyRing.from_key_files(files(tmp_path, "k1", "k2"), "k2", active_setting="X_ACTIVE")
    assert two.active_key_id == "k2" and two.key_ids == {"k1", "k2"}


def test_several_keys_need_the_active_one_named(tmp_path: Path) -> None:
    assert "missing" in refusal(files(tmp_path, "k1", "k2"), None)[1]
    assert "unknown_key_id" in refusal(files(tmp_path, "k1"), "k9")[1]


def test_a_key_file_of_the_wrong_length_is_refused_by_its_setting(tmp_path: Path) -> None:
    path = write_private_file(tmp_path / "long.key", os.urandom(48).hex())
    settings, text = refusal({"k1": (path, "X_KEY[k1]")}, None)
    assert settings == ("X_KEY[k1]",) and "key_wrong_length" in text
