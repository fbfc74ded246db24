"""HMAC-SHA256 request signing (scheme ``v1``), SPEC section 4. Described for operators in docs/signing.md;
test vectors in schemas/signing/hmac-sha256-v1.vectors.json.

Canonical string: ``METHOD \\n path \\n timestamp \\n nonce \\n hex(SHA256(body))``, no trailing newline,
where METHOD is upper-cased, path is the raw request target (path plus ``?query`` if any, exactly as sent),
timestamp and nonce are the header texts.
Signature header: ``v1=`` + lowercase hex HMAC-SHA256(key, canonical).

Verification is pure (``now`` is a parameter) and raises one uniform
:class:`~yovision_platform.errors.SignatureError` (``code == "unauthorized"``) whatever went wrong; the
internal :class:`~yovision_platform.errors.SignatureRejectReason` is for metrics and logs only. Nonce replay
(receipts kept :data:`NONCE_RECEIPT_TTL_SECONDS`) is the receiver's job, keyed by
(key id, nonce) and compared by :attr:`VerifiedRequest.request_digest_hex`.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import math
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from yovision_platform.errors import ConfigError, SignatureError, SignatureRejectReason
from yovision_platform.security._redaction import register_secret
from yovision_platform.settings import read_secret_file

__all__ = [
    "HEADER_KEY_ID",
    "HEADER_NONCE",
    "HEADER_SIGNATURE",
    "HEADER_TIMESTAMP",
    "MAX_CLOCK_SKEW_SECONDS",
    "MIN_KEY_BYTES",
    "NONCE_RECEIPT_TTL_SECONDS",
    "SIGNATURE_SCHEME",
    "KeyRing",
    "SignatureError",
    "SignatureRejectReason",
    "SigningKey",
    "VerifiedRequest",
    "body_digest_hex",
    "canonical_string",
    "compute_signature_hex",
    "load_key_file",
    "new_nonce",
    "sign_request",
    "verify_request",
]

HEADER_KEY_ID = "X-Yovision-Key-Id"
HEADER_TIMESTAMP = "X-Yovision-Timestamp"
HEADER_NONCE = "X-Yovision-Nonce"
HEADER_SIGNATURE = "X-Yovision-Signature"
SIGNATURE_SCHEME = "v1"

MAX_CLOCK_SKEW_SECONDS = 300
NONCE_RECEIPT_TTL_SECONDS = 600
MIN_KEY_BYTES = 32
NONCE_BYTES = 16

KEY_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# Unix seconds, ASCII digits, no sign, no leading zero; 11 digits reach the year 5138.
TIMESTAMP_PATTERN = re.compile(r"0|[1-9][0-9]{0,10}")
# 16 to 32 random bytes as lowercase hex.
NONCE_PATTERN = re.compile(r"[0-9a-f]{32,64}")
SIGNATURE_PATTERN = re.compile(r"v1=([0-9a-f]{64})")
METHOD_PATTERN = re.compile(r"[A-Z]{1,16}")
# Visible ASCII only: no space, no CR/LF that could forge extra canonical lines.
PATH_PATTERN = re.compile(r"/[\x21-\x7e]{0,2047}")
KEY_FILE_HEX_PATTERN = re.compile(r"(?:[0-9a-fA-F]{2})+")


def body_digest_hex(body: bytes) -> str:
    """Lowercase hex SHA-256 of the exact body bytes."""
    return hashlib.sha256(body).hexdigest()


def canonical_string(method: str, path: str, timestamp: str, nonce: str, body: bytes) -> str:
    """The newline-joined string that is signed. Raises ValueError for a method or path that could not
    be signed unambiguously (lowercase methods are upper-cased first)."""
    method = method.upper()
    if METHOD_PATTERN.fullmatch(method) is None:
        raise ValueError("method must be 1-16 ASCII letters")
    if PATH_PATTERN.fullmatch(path) is None:
        raise ValueError("path must start with / and hold only visible ASCII (max 2048 chars)")
    return "\n".join((method, path, timestamp, nonce, body_digest_hex(body)))


def compute_signature_hex(key: bytes, canonical: str) -> str:
    return hmac.new(key, canonical.encode("ascii"), hashlib.sha256).hexdigest()


def new_nonce() -> str:
    return secrets.token_hex(NONCE_BYTES)


@dataclass(frozen=True)
class SigningKey:
    key_id: str
    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if KEY_ID_PATTERN.fullmatch(self.key_id) is None:
            raise ValueError("key id must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}")
        if len(self.secret) < MIN_KEY_BYTES:
            raise ValueError(f"key must hold at least {MIN_KEY_BYTES} bytes")


def load_key_file(path: str | os.PathLike[str], setting_name: str) -> bytes:
    """Read a key file: hex text of at least :data:`MIN_KEY_BYTES` random bytes (``openssl rand -hex 32``),
    one trailing newline allowed. Same file rules as :func:`~yovision_platform.settings.read_secret_file`
    (regular file, no access for others). Errors name ``setting_name``, never the content. The key's hex
    and base64 forms are registered with the log redactor."""
    text = read_secret_file(path, setting_name).get_secret_value()
    if KEY_FILE_HEX_PATTERN.fullmatch(text) is None:
        raise ConfigError(setting_name, "key_malformed", "key file must hold hex text (even length)")
    key = binascii.unhexlify(text)
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(setting_name, "key_too_short", f"key must decode to at least {MIN_KEY_BYTES} bytes")
    register_secret(key)
    return key


class KeyRing:
    """The keys a process signs or verifies with.

    Verification accepts any key in the ring; signing uses the active key. That makes rotation a
    configuration change without downtime (docs/signing.md). A verify-only ring has no active key.
    """

    def __init__(self, keys: Iterable[SigningKey], active_key_id: str | None = None) -> None:
        self._keys: dict[str, SigningKey] = {}
        for key in keys:
            if key.key_id in self._keys:
                raise ValueError("duplicate key id in key ring")
            self._keys[key.key_id] = key
        if not self._keys:
            raise ValueError("key ring needs at least one key")
        if active_key_id is not None and active_key_id not in self._keys:
            raise ValueError("active key id is not in the key ring")
        self._active_key_id = active_key_id

    @classmethod
    def from_key_files(
        cls,
        key_files: Mapping[str, str | os.PathLike[str]],
        setting_name: str,
        active_key_id: str | None = None,
    ) -> KeyRing:
        """Load ``{key_id: path}``; every problem is a ConfigError naming ``setting_name``."""
        keys: list[SigningKey] = []
        for key_id, path in key_files.items():
            if KEY_ID_PATTERN.fullmatch(key_id) is None:
                raise ConfigError(
                    setting_name, "key_id_malformed", "key id must match [A-Za-z0-9][A-Za-z0-9._-]*"
                )
            keys.append(SigningKey(key_id, load_key_file(path, f"{setting_name}[{key_id}]")))
        if not keys:
            raise ConfigError(setting_name, "missing", "no signing key configured")
        if active_key_id is not None and active_key_id not in key_files:
            raise ConfigError(setting_name, "active_key_missing", "the active key id has no key file")
        return cls(keys, active_key_id)

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    @property
    def active_key_id(self) -> str | None:
        return self._active_key_id

    def get(self, key_id: str) -> SigningKey | None:
        return self._keys.get(key_id)

    def active(self) -> SigningKey:
        if self._active_key_id is None:
            raise ValueError("this key ring is verify-only: it has no active key")
        return self._keys[self._active_key_id]


def sign_request(
    keyring: KeyRing, *, method: str, path: str, body: bytes, now: float, nonce: str | None = None
) -> dict[str, str]:
    """Headers that sign this request with the ring's active key. ``now`` is Unix time in seconds."""
    if not math.isfinite(now) or now < 0:
        raise ValueError("now must be a finite, non-negative Unix time")
    key = keyring.active()
    timestamp = str(math.floor(now))
    nonce = new_nonce() if nonce is None else nonce
    if NONCE_PATTERN.fullmatch(nonce) is None:
        raise ValueError("nonce must be 32-64 lowercase hex characters")
    canonical = canonical_string(method, path, timestamp, nonce, body)
    return {
        HEADER_KEY_ID: key.key_id,
        HEADER_TIMESTAMP: timestamp,
        HEADER_NONCE: nonce,
        HEADER_SIGNATURE: f"{SIGNATURE_SCHEME}={compute_signature_hex(key.secret, canonical)}",
    }


@dataclass(frozen=True)
class VerifiedRequest:
    """What a receiver needs after a successful verification, e.g. for its nonce receipt."""

    key_id: str
    timestamp: int
    nonce: str
    body_digest_hex: str
    # SHA-256 of the canonical string: equal digests mean the same method, path, timestamp, nonce and body.
    request_digest_hex: str


_SIGNING_HEADERS = (HEADER_KEY_ID, HEADER_TIMESTAMP, HEADER_NONCE, HEADER_SIGNATURE)


def _signing_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    wanted = {name.lower(): name for name in _SIGNING_HEADERS}
    found: dict[str, str] = {}
    for name, value in pairs:
        canonical_name = wanted.get(name.lower())
        if canonical_name is None:
            continue
        if canonical_name in found:
            raise SignatureError(SignatureRejectReason.DUPLICATE_HEADER)
        found[canonical_name] = value
    if len(found) != len(_SIGNING_HEADERS):
        raise SignatureError(SignatureRejectReason.MISSING_HEADER)
    return found


def verify_request(
    keyring: KeyRing,
    *,
    method: str,
    path: str,
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    body: bytes,
    now: float,
) -> VerifiedRequest:
    """Verify a signed request at Unix time ``now`` (seconds). Accepts ``|floor(now) - timestamp| <= 300``.

    ``headers`` may be any mapping (matched case-insensitively) or a list of raw (name, value) pairs;
    a signing header present twice is refused. ``path`` must be the raw request target as received.
    Raises SignatureError (always ``code == "unauthorized"``) with an internal ``reason``.
    """
    if not math.isfinite(now):
        raise ValueError("now must be a finite Unix time")
    found = _signing_headers(headers)
    key_id = found[HEADER_KEY_ID]
    timestamp_text = found[HEADER_TIMESTAMP]
    nonce = found[HEADER_NONCE]
    signature_match = SIGNATURE_PATTERN.fullmatch(found[HEADER_SIGNATURE])
    if KEY_ID_PATTERN.fullmatch(key_id) is None:
        raise SignatureError(SignatureRejectReason.MALFORMED_KEY_ID)
    if TIMESTAMP_PATTERN.fullmatch(timestamp_text) is None:
        raise SignatureError(SignatureRejectReason.MALFORMED_TIMESTAMP)
    if NONCE_PATTERN.fullmatch(nonce) is None:
        raise SignatureError(SignatureRejectReason.MALFORMED_NONCE)
    if signature_match is None:
        raise SignatureError(SignatureRejectReason.MALFORMED_SIGNATURE)
    key = keyring.get(key_id)
    if key is None:
        raise SignatureError(SignatureRejectReason.UNKNOWN_KEY_ID)
    timestamp = int(timestamp_text)
    # Whole seconds on both sides, inclusive: a timestamp exactly 300 s old or ahead is accepted, 301 is not,
    # whatever fraction of a second the receiver's clock shows.
    if abs(math.floor(now) - timestamp) > MAX_CLOCK_SKEW_SECONDS:
        raise SignatureError(SignatureRejectReason.STALE_TIMESTAMP)
    try:
        canonical = canonical_string(method, path, timestamp_text, nonce, body)
    except ValueError:
        raise SignatureError(SignatureRejectReason.MALFORMED_REQUEST) from None
    expected = hmac.new(key.secret, canonical.encode("ascii"), hashlib.sha256).digest()
    if not hmac.compare_digest(expected, bytes.fromhex(signature_match.group(1))):
        raise SignatureError(SignatureRejectReason.SIGNATURE_MISMATCH)
    return VerifiedRequest(
        key_id=key_id,
        timestamp=timestamp,
        nonce=nonce,
        body_digest_hex=canonical.rsplit("\n", 1)[1],
        request_digest_hex=hashlib.sha256(canonical.encode("ascii")).hexdigest(),
    )
