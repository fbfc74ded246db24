from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from yovision_platform.errors import ConfigError, SignatureError, SignatureRejectReason
from yovision_platform.security import (
    HEADER_KEY_ID,
    HEADER_NONCE,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    MAX_CLOCK_SKEW_SECONDS,
    MIN_KEY_BYTES,
    KeyRing,
    SigningKey,
    body_digest_hex,
    canonical_string,
    compute_signature_hex,
    load_key_file,
    new_nonce,
    sign_request,
    verify_request,
)

REPO_ROOT = Path(__file__).resolve().parents[3]
VECTORS_PATH = REPO_ROOT / "schemas" / "signing" / "hmac-sha256-v1.vectors.json"
PATH = "/internal/v1/audit-events:batch"
BODY = b'{"items":[]}'
NOW = 1_700_000_000
KEY_A = SigningKey("bell-a", bytes(range(32)))
KEY_B = SigningKey("bell-b", bytes(range(100, 132)))


def vectors() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
    return loaded


def vector_body(vector: dict[str, Any]) -> bytes:
    if "body_hex" in vector:
        return bytes.fromhex(vector["body_hex"])
    return str(vector["body_utf8"]).encode("utf-8")


def signed(ring: KeyRing, **overrides: Any) -> dict[str, str]:
    request: dict[str, Any] = {"method": "POST", "path": PATH, "body": BODY, "now": NOW}
    request.update(overrides)
    return sign_request(ring, **request)


def rejection(ring: KeyRing, headers: Any, **overrides: Any) -> SignatureError:
    request: dict[str, Any] = {"method": "POST", "path": PATH, "body": BODY, "now": NOW}
    request.update(overrides)
    with pytest.raises(SignatureError) as caught:
        verify_request(ring, headers=headers, **request)
    return caught.value


def write_key_file(path: Path, content: str, mode: int = 0o600) -> Path:
    path.write_text(content, encoding="ascii")
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize("vector", vectors()["signing_vectors"], ids=lambda v: v["name"])
def test_published_signing_vectors_match_the_code(vector: dict[str, Any]) -> None:
    body = vector_body(vector)
    key = bytes.fromhex(vector["key_hex"])
    canonical = canonical_string(vector["method"], vector["path"], vector["timestamp"], vector["nonce"], body)
    assert canonical == vector["expected"]["canonical_string"]
    assert body_digest_hex(body) == vector["expected"]["body_sha256_hex"]
    assert compute_signature_hex(key, canonical) == vector["expected"]["signature_hex"]

    ring = KeyRing([SigningKey(vector["key_id"], key)], active_key_id=vector["key_id"])
    headers = sign_request(
        ring, method=vector["method"], path=vector["path"], body=body,
        now=int(vector["timestamp"]), nonce=vector["nonce"],
    )  # fmt: skip
    assert headers[HEADER_SIGNATURE] == vector["expected"]["signature_header"]
    verified = verify_request(
        ring, method=vector["method"], path=vector["path"], headers=headers, body=body,
        now=int(vector["timestamp"]),
    )  # fmt: skip
    assert verified.body_digest_hex == vector["expected"]["body_sha256_hex"]


@pytest.mark.parametrize("vector", vectors()["verification_vectors"], ids=lambda v: v["name"])
def test_published_verification_vectors_match_the_code(vector: dict[str, Any]) -> None:
    key = vectors()["verification_key"]
    ring = KeyRing([SigningKey(key["key_id"], bytes.fromhex(key["key_hex"]))])
    request = {
        "method": vector["method"],
        "path": vector["path"],
        "headers": vector["headers"],
        "body": vector["body_utf8"].encode("utf-8"),
        "now": vector["now"],
    }
    if vector["expected_result"] == "accepted":
        verify_request(ring, **request)
    else:
        with pytest.raises(SignatureError) as caught:
            verify_request(ring, **request)
        assert caught.value.code == vector["expected_result"]
        assert caught.value.reason == vector["internal_reason"]


def test_signed_request_verifies_and_reports_key_nonce_and_digests() -> None:
    ring = KeyRing([KEY_A], active_key_id="bell-a")
    headers = signed(ring)
    verified = verify_request(ring, method="POST", path=PATH, headers=headers, body=BODY, now=NOW)
    assert verified.key_id == "bell-a"
    assert verified.nonce == headers[HEADER_NONCE]
    assert verified.timestamp == NOW
    assert verified.body_digest_hex == body_digest_hex(BODY)
    assert len(verified.request_digest_hex) == 64


def test_headers_are_matched_case_insensitively_and_as_raw_pairs() -> None:
    ring = KeyRing([KEY_A], active_key_id="bell-a")
    headers = signed(ring)
    lowered = {name.lower(): value for name, value in headers.items()}
    verify_request(ring, method="post", path=PATH, headers=lowered, body=BODY, now=NOW)
    verify_request(ring, method="POST", path=PATH, headers=list(lowered.items()), body=BODY, now=NOW)


@pytest.mark.parametrize(
    "offset", [MAX_CLOCK_SKEW_SECONDS, -MAX_CLOCK_SKEW_SECONDS, 0, 300.5, 300.999, -299.5, -299.001]
)
def test_clock_skew_of_up_to_300_whole_seconds_either_way_is_accepted(offset: float) -> None:
    ring = KeyRing([KEY_A], active_key_id="bell-a")
    headers = signed(ring)
    verify_request(ring, method="POST", path=PATH, headers=headers, body=BODY, now=NOW + offset)


@pytest.mark.parametrize(
    "offset", [MAX_CLOCK_SKEW_SECONDS + 1, -(MAX_CLOCK_SKEW_SECONDS + 1), 301.5, -300.5, -300.001]
)
def test_clock_skew_beyond_300_whole_seconds_either_way_is_rejected(offset: float) -> None:
    ring = KeyRing([KEY_A], active_key_id="bell-a")
    error = rejection(ring, signed(ring), now=NOW + offset)
    assert error.code == "unauthorized"
    assert error.reason is SignatureRejectReason.STALE_TIMESTAMP


@pytest.mark.parametrize(
    ("tamper", "value"),
    [("body", b'{"items":[1]}'), ("method", "PUT"), ("path", PATH + "x"), ("path", PATH + "?a=1")],
)
def test_tampered_request_is_rejected_with_the_uniform_code(tamper: str, value: object) -> None:
    ring = KeyRing([KEY_A], active_key_id="bell-a")
    error = rejection(ring, signed(ring), **{tamper: value})
    assert (error.code, str(error)) == ("unauthorized", "unauthorized")
    assert error.reason is SignatureRejectReason.SIGNATURE_MISMATCH


def test_tampered_nonce_is_rejected() -> None:
    ring = KeyRing([KEY_A], active_key_id="bell-a")
    headers = signed(ring)
    headers[HEADER_NONCE] = new_nonce()
    assert rejection(ring, headers).reason is SignatureRejectReason.SIGNATURE_MISMATCH


def test_tampered_timestamp_within_the_window_is_rejected() -> None:
    ring = KeyRing([KEY_A], active_key_id="bell-a")
    headers = signed(ring)
    headers[HEADER_TIMESTAMP] = str(NOW + 1)
    assert rejection(ring, headers).reason is SignatureRejectReason.SIGNATURE_MISMATCH


def test_unknown_key_id_is_rejected_with_the_uniform_code() -> None:
    sender = KeyRing([KEY_B], active_key_id="bell-b")
    receiver = KeyRing([KEY_A])
    error = rejection(receiver, signed(sender))
    assert (error.code, str(error)) == ("unauthorized", "unauthorized")
    assert error.reason is SignatureRejectReason.UNKNOWN_KEY_ID


def test_same_key_id_with_a_different_secret_is_a_mismatch() -> None:
    sender = KeyRing([SigningKey("bell-a", bytes(32))], active_key_id="bell-a")
    receiver = KeyRing([KEY_A])
    assert rejection(receiver, signed(sender)).reason is SignatureRejectReason.SIGNATURE_MISMATCH


@pytest.mark.parametrize(
    ("header", "value", "reason"),
    [
        (HEADER_KEY_ID, "bad id!", SignatureRejectReason.MALFORMED_KEY_ID),
        (HEADER_KEY_ID, "", SignatureRejectReason.MALFORMED_KEY_ID),
        (HEADER_TIMESTAMP, "", SignatureRejectReason.MALFORMED_TIMESTAMP),
        (HEADER_TIMESTAMP, "-1700000000", SignatureRejectReason.MALFORMED_TIMESTAMP),
        (HEADER_TIMESTAMP, "1700000000.0", SignatureRejectReason.MALFORMED_TIMESTAMP),
        (HEADER_TIMESTAMP, "01700000000", SignatureRejectReason.MALFORMED_TIMESTAMP),
        (HEADER_TIMESTAMP, "\u0661\u0667\u0660\u0660", SignatureRejectReason.MALFORMED_TIMESTAMP),
        (HEADER_TIMESTAMP, "1700000000\n", SignatureRejectReason.MALFORMED_TIMESTAMP),
        (HEADER_NONCE, "abc", SignatureRejectReason.MALFORMED_NONCE),
        (HEADER_NONCE, "G" * 32, SignatureRejectReason.MALFORMED_NONCE),
        (HEADER_NONCE, "AB" * 16, SignatureRejectReason.MALFORMED_NONCE),
        (HEADER_NONCE, "ab" * 33, SignatureRejectReason.MALFORMED_NONCE),
        (HEADER_SIGNATURE, "deadbeef", SignatureRejectReason.MALFORMED_SIGNATURE),
        (HEADER_SIGNATURE, "v2=" + "a" * 64, SignatureRejectReason.MALFORMED_SIGNATURE),
        (HEADER_SIGNATURE, "v1=" + "a" * 63, SignatureRejectReason.MALFORMED_SIGNATURE),
        (HEADER_SIGNATURE, "v1=" + "A" * 64, SignatureRejectReason.MALFORMED_SIGNATURE),
    ],
)
def test_malformed_header_is_rejected_with_the_uniform_code(
    header: str, value: str, reason: SignatureRejectReason
) -> None:
    ring = KeyRing([KEY_A], active_key_id="bell-a")
    headers = signed(ring)
    headers[header] = value
    error = rejection(ring, headers)
    assert (error.code, str(error)) == ("unauthorized", "unauthorized")
    assert error.reason is reason


@pytest.mark.parametrize("header", [HEADER_KEY_ID, HEADER_TIMESTAMP, HEADER_NONCE, HEADER_SIGNATURE])
def test_missing_header_is_rejected(header: str) -> None:
    ring = KeyRing([KEY_A], active_key_id="bell-a")
    headers = signed(ring)
    del headers[header]
    assert rejection(ring, headers).reason is SignatureRejectReason.MISSING_HEADER


def test_a_signing_header_sent_twice_is_rejected() -> None:
    ring = KeyRing([KEY_A], active_key_id="bell-a")
    pairs = [*signed(ring).items(), (HEADER_SIGNATURE.lower(), "v1=" + "0" * 64)]
    assert rejection(ring, pairs).reason is SignatureRejectReason.DUPLICATE_HEADER


@pytest.mark.parametrize("path", ["relative", "/with space", "/line\nbreak", "/ü"])
def test_a_path_that_cannot_be_signed_unambiguously_is_rejected(path: str) -> None:
    ring = KeyRing([KEY_A], active_key_id="bell-a")
    headers = signed(ring)
    assert rejection(ring, headers, path=path).reason is SignatureRejectReason.MALFORMED_REQUEST
    with pytest.raises(ValueError, match="path"):
        signed(ring, path=path)


def test_rotation_receiver_accepts_both_key_ids_while_sender_switches() -> None:
    receiver = KeyRing([KEY_A, KEY_B])
    old_sender = KeyRing([KEY_A], active_key_id="bell-a")
    new_sender = KeyRing([KEY_A, KEY_B], active_key_id="bell-b")
    for sender in (old_sender, new_sender):
        headers = signed(sender)
        verified = verify_request(receiver, method="POST", path=PATH, headers=headers, body=BODY, now=NOW)
        assert verified.key_id == sender.active().key_id
    retired = KeyRing([KEY_B])
    assert rejection(retired, signed(old_sender)).reason is SignatureRejectReason.UNKNOWN_KEY_ID


def test_verify_only_key_ring_cannot_sign() -> None:
    with pytest.raises(ValueError, match="verify-only"):
        signed(KeyRing([KEY_A]))


def test_key_ring_refuses_duplicates_short_keys_and_unknown_active_key() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        KeyRing([KEY_A, SigningKey("bell-a", bytes(32))])
    with pytest.raises(ValueError, match="at least 32"):
        SigningKey("bell-c", bytes(MIN_KEY_BYTES - 1))
    with pytest.raises(ValueError, match="active"):
        KeyRing([KEY_A], active_key_id="bell-b")


def test_signing_key_repr_hides_the_secret() -> None:
    assert bytes(range(32)).hex() not in repr(KEY_A)
    assert repr(bytes(range(32))) not in repr(KEY_A)


def test_nonces_are_fresh_32_hex_chars() -> None:
    nonces = {new_nonce() for _ in range(100)}
    assert len(nonces) == 100
    assert all(len(nonce) == 32 and int(nonce, 16) >= 0 for nonce in nonces)


def test_key_file_with_hex_of_32_bytes_and_trailing_newline_loads(tmp_path: Path) -> None:
    key = bytes(range(200, 232))
    path = write_key_file(tmp_path / "bell.key", key.hex() + "\n")
    assert load_key_file(path, "BELL_SIGNING_KEY_FILE") == key


def test_key_file_shorter_than_32_bytes_is_refused_without_echoing_it(tmp_path: Path) -> None:
    content = bytes(range(31)).hex()
    path = write_key_file(tmp_path / "short.key", content)
    with pytest.raises(ConfigError) as caught:
        load_key_file(path, "BELL_SIGNING_KEY_FILE")
    assert caught.value.problems[0].reason == "key_too_short"
    assert "BELL_SIGNING_KEY_FILE" in str(caught.value)
    assert content not in str(caught.value)


@pytest.mark.parametrize(
    "content", ["not hex at all, but long enough to pass the byte count check....", "0" * 63 + "\n"]
)
def test_key_file_that_is_not_even_length_hex_is_refused(tmp_path: Path, content: str) -> None:
    path = write_key_file(tmp_path / "bad.key", content)
    with pytest.raises(ConfigError) as caught:
        load_key_file(path, "BELL_SIGNING_KEY_FILE")
    assert caught.value.problems[0].reason == "key_malformed"
    assert content.strip() not in str(caught.value)


def test_world_readable_key_file_is_refused(tmp_path: Path) -> None:
    path = write_key_file(tmp_path / "open.key", bytes(range(32)).hex(), mode=0o644)
    with pytest.raises(ConfigError) as caught:
        load_key_file(path, "BELL_SIGNING_KEY_FILE")
    assert caught.value.problems[0].reason == "world_accessible"


def test_key_ring_from_files_names_the_setting_and_key_id(tmp_path: Path) -> None:
    good = write_key_file(tmp_path / "a.key", bytes(range(32)).hex())
    short = write_key_file(tmp_path / "b.key", "00" * 16)
    ring = KeyRing.from_key_files({"bell-a": good}, "SENSE_BELL_KEY_FILES", active_key_id="bell-a")
    assert ring.key_ids == ("bell-a",)
    with pytest.raises(ConfigError) as caught:
        KeyRing.from_key_files({"bell-a": good, "bell-b": short}, "SENSE_BELL_KEY_FILES")
    assert caught.value.settings == ("SENSE_BELL_KEY_FILES[bell-b]",)
    with pytest.raises(ConfigError) as caught:
        KeyRing.from_key_files({"bell-a": good}, "SENSE_BELL_KEY_FILES", active_key_id="bell-z")
    assert caught.value.problems[0].reason == "active_key_missing"
